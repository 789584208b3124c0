"""The ``skqbnorm`` command line: ``skqbnorm demo`` and ``skqbnorm evaluate``."""

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import CSLS, Centering, DynamicInvertedSoftmax, GloballyCorrected, InvertedSoftmax
from .metrics import hubness, retrieval_metrics

COLUMNS = ("R@1", "R@5", "R@10", "MdR", "MnR", "skewness")
METHODS = ("raw", "is", "dis", "csls", "gc", "cent")
LABELS = {"raw": "raw similarities", "is": "IS", "dis": "DIS", "csls": "CSLS", "gc": "GC", "cent": "CENT"}


def make_normaliser(method, beta=20.0, k=None):
    """The normaliser a method name stands for (None for raw similarities)."""
    if method == "raw":
        return None
    if method == "is":
        return InvertedSoftmax(beta=beta)
    if method == "dis":
        return DynamicInvertedSoftmax(beta=beta, k=1 if k is None else k)
    if method == "csls":
        return CSLS(k=10 if k is None else k)
    return GloballyCorrected() if method == "gc" else Centering()


def describe(method, normaliser):
    if normaliser is None:
        return LABELS[method]
    params = {name: normaliser.get_params()[name] for name in ("beta", "k") if name in normaliser.get_params()}
    return LABELS[method] + (" (" + ", ".join(f"{n}={v:g}" for n, v in params.items()) + ")" if params else "")


def evaluate(query_sims, gt, bank_sims, methods, beta=20.0, k=None, bank_name=None, progress=None):
    """One row of retrieval metrics and hubness per method, and the last scores."""
    rows, scores = [], None
    for method in methods:
        start = time.perf_counter()
        normaliser = make_normaliser(method, beta, k)
        scores = query_sims if normaliser is None else normaliser.fit(bank_sims).transform(query_sims)
        row = {"bank": bank_name, "method": describe(method, normaliser)} if bank_name else {"method": describe(method, normaliser)}
        row.update(retrieval_metrics(scores, gt))
        row["skewness"] = hubness(scores, k=min(10, scores.shape[1]))["skewness"]
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
        if progress:
            progress(f"  {row.get('bank') or ''} {row['method']}: {row['seconds']:.2f} s".replace("   ", "  "))
    return rows, scores


def format_rows(rows, style="table"):
    keys = [key for key in ("bank", "method") if key in rows[0]] + list(COLUMNS) + ["seconds"]
    if style == "json":
        return json.dumps([{key: row[key] for key in keys} for row in rows], indent=2)
    if style == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue().rstrip("\n")
    text_width = {key: max(len(key), *(len(str(row[key])) for row in rows)) for key in ("bank", "method") if key in rows[0]}
    header = "".join(f"{key:<{width + 2}}" for key, width in text_width.items())
    header += "".join(f"{'skew' if c == 'skewness' else c:>8}" for c in COLUMNS)
    lines = [header, "-" * len(header)]
    for row in rows:
        line = "".join(f"{row[key]!s:<{width + 2}}" for key, width in text_width.items())
        line += "".join(f"{row[c]:>8.2f}" if c == "skewness" else f"{row[c]:>8.1f}" for c in COLUMNS)
        lines.append(line)
    return "\n".join(lines)


def load_matrix(path, name):
    """A 2-D array from .npy (memory-mapped) or .npz (its one array, or the one named ``name``)."""
    path = Path(path)
    if not path.is_file():
        raise CommandError(f"{path}: no such file (given as --{name.replace('_', '-')}).")
    if path.suffix == ".npy":
        return np.load(path, mmap_mode="r")
    if path.suffix == ".npz":
        with np.load(path) as archive:
            keys = list(archive.keys())
            if len(keys) == 1 or name in keys:
                return archive[keys[0] if len(keys) == 1 else name]
            raise CommandError(f"{path} holds several arrays {keys}; name one of them {name!r}.")
    raise CommandError(f"{path}: expected a .npy or .npz file.")


class CommandError(Exception):
    """An error the command line reports in one line, with exit status 2."""


def run_evaluate(args):
    query_sims = load_matrix(args.sims, "sims")
    bank_sims = load_matrix(args.bank_sims, "bank_sims")
    for name, matrix in (("--sims", query_sims), ("--bank-sims", bank_sims)):
        if matrix.ndim != 2:
            raise CommandError(f"{name} must be a 2-D matrix; got shape {matrix.shape}.")
    if bank_sims.shape[1] != query_sims.shape[1]:
        raise CommandError(
            f"--sims has shape {query_sims.shape} and --bank-sims has shape {bank_sims.shape}: "
            "both need one column per gallery item."
        )
    if args.gt is not None:
        gt = np.asarray(load_matrix(args.gt, "gt"))
    elif query_sims.shape[0] == query_sims.shape[1]:
        gt = np.arange(query_sims.shape[0])  # query i <-> gallery item i
    else:
        raise CommandError(f"--sims has shape {query_sims.shape}, not square: give --gt with the correct item per query.")
    methods = METHODS if args.method == "all" else ("raw", args.method) if args.method != "raw" else ("raw",)
    if args.save and args.method == "all":
        raise CommandError("--save writes one normalised matrix: choose one --method.")
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr))
    try:
        rows, scores = evaluate(query_sims, gt, bank_sims, methods, args.beta, args.k, progress=progress)
    except ValueError as error:
        raise CommandError(str(error)) from error
    print(format_rows(rows, args.format))
    if args.save:
        np.save(args.save, scores)
        if progress:
            progress(f"wrote {args.save}: {scores.shape} {scores.dtype}")
    return 0


def run_demo(args):
    from .datasets import load_wordnet_revdict

    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr))
    data = load_wordnet_revdict()
    if progress:
        progress(f"WordNet reverse dictionary: {len(data.query_gt)} definitions query "
                 f"{len(data.gallery_words)} nouns (all-MiniLM-L6-v2 embeddings)")
    query_sims = data.query_embeddings @ data.gallery_embeddings.T
    banks = {
        "in-domain": data.bank_embeddings @ data.gallery_embeddings.T,
        "far-domain": data.far_bank_embeddings @ data.gallery_embeddings.T,
    }
    rows = []
    for bank_name, bank_sims in banks.items():
        if progress:
            progress(f"{bank_name} querybank: {bank_sims.shape[0]} queries")
        methods = METHODS if not rows else METHODS[1:]
        rows += evaluate(query_sims, data.query_gt, bank_sims, methods, bank_name=bank_name, progress=progress)[0]
    rows[0]["bank"] = "(none)"
    print(format_rows(rows, args.format))
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="skqbnorm", description="Hubness-aware retrieval: querybank normalisation.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="every normaliser on the bundled WordNet reverse dictionary")
    evaluate_ = commands.add_parser("evaluate", help="normalise and score your own similarity matrices")
    evaluate_.add_argument("--sims", required=True, help="query x gallery similarities (.npy or .npz)")
    evaluate_.add_argument("--bank-sims", required=True, help="querybank x gallery similarities (.npy or .npz)")
    evaluate_.add_argument("--gt", help="correct gallery index per query (.npy/.npz); default: the diagonal")
    evaluate_.add_argument("--method", default="all", choices=("all",) + METHODS, help="normaliser (default: all)")
    evaluate_.add_argument("--beta", type=float, default=20.0, help="inverse temperature of IS and DIS")
    evaluate_.add_argument("--k", type=int, default=None, help="k of DIS (default 1) and CSLS (default 10)")
    evaluate_.add_argument("--save", help="write the normalised matrix of --method to this .npy file")
    for command in (demo, evaluate_):
        command.add_argument("--format", default="table", choices=("table", "json", "csv"))
        command.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    demo.set_defaults(run=run_demo)
    evaluate_.set_defaults(run=run_evaluate)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except CommandError as error:
        parser.exit(2, f"skqbnorm {args.command}: error: {error}\n")
