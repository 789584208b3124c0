"""The ``skqbnorm`` command line."""

import argparse
import sys
import time

from . import CSLS, Centering, DynamicInvertedSoftmax, GloballyCorrected, InvertedSoftmax
from .datasets import load_digits_retrieval
from .metrics import hubness, retrieval_metrics

COLUMNS = ("R@1", "R@5", "R@10", "MdR", "MnR")


def demo_normalisers():
    return {
        "raw similarities": None,
        "IS (beta=20)": InvertedSoftmax(beta=20.0),
        "DIS (beta=20, k=1)": DynamicInvertedSoftmax(beta=20.0, k=1),
        "CSLS (k=10)": CSLS(k=10),
        "GC": GloballyCorrected(),
        "CENT": Centering(),
    }


def evaluation_rows(query_sims, query_gt, bank_sims, progress=None):
    """One row of retrieval metrics and hubness per normaliser."""
    rows = []
    for name, normaliser in demo_normalisers().items():
        start = time.perf_counter()
        scores = query_sims if normaliser is None else normaliser.fit(bank_sims).transform(query_sims)
        row = {"method": name, **retrieval_metrics(scores, query_gt)}
        row["skewness"] = hubness(scores, k=10)["skewness"]
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
        if progress:
            progress(f"  {name}: {row['seconds']:.2f} s")
    return rows


def format_table(rows):
    header = f"{'method':<22}" + "".join(f"{c:>8}" for c in COLUMNS) + f"{'skew':>8}"
    lines = [header, "-" * len(header)]
    for row in rows:
        values = "".join(f"{row[c]:>8.1f}" for c in COLUMNS)
        lines.append(f"{row['method']:<22}{values}{row['skewness']:>8.2f}")
    return "\n".join(lines)


def run_demo(args):
    print("Digits retrieval: corrupted views query 800 clean images; querybank = "
          "corrupted views of the 997 training digits.", file=sys.stderr)
    data = load_digits_retrieval(random_state=args.seed)
    rows = evaluation_rows(data.query_sims, data.query_gt, data.bank_sims,
                           progress=lambda line: print(line, file=sys.stderr))
    print(format_table(rows))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="skqbnorm", description="Hubness-aware retrieval.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="normalisers compared on a real retrieval task")
    demo.add_argument("--seed", type=int, default=0, help="seed of the split and corruptions")
    demo.set_defaults(run=run_demo)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.run(args)
