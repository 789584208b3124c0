"""The ``skqbnorm`` command line: ``skqbnorm demo`` and ``skqbnorm evaluate``.

Every bad input ends in one line on stderr and exit status 2, and no input file is
ever written: inputs are checked (header against file size, dtype, shape, finite
values) before anything is computed, and ``--save`` writes a temporary file beside
its target, reserved before the evaluation, that replaces the target at the end (an
existing target only with ``--force``) and is removed if the run stops first. Ctrl-C
ends in one line and exit status 130, SIGTERM during ``--save`` in one line and 143.
The commands themselves are in :mod:`skqbnorm._cli_commands`; the evaluation is
:func:`skqbnorm.compare`'s (:mod:`skqbnorm._evaluation`).
"""

import argparse
import math
import os
import sys
import textwrap

from . import __version__
from ._cli_commands import chosen_methods, run_demo, run_evaluate
from ._evaluation import CONFIDENCE
from ._files import CommandError, Terminated
from .catalogue import METHODS, class_default

# -- arguments --------------------------------------------------------------------------


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number; got {text!r}")
    return value


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {text!r}")
    return value


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0; got {text!r}")
    return value


def option_help(name, what, rule=""):
    """``what`` of the methods that take setting ``name``, their class defaults, ``rule``."""
    defaults = {METHODS[method].label: class_default(method, name)
                for method, spec in METHODS.items() if name in spec.options}
    *others, last = defaults
    users = f"{', '.join(others)} and {last}" if others else last
    if len(set(defaults.values())) == 1:
        default = f"default {next(iter(defaults.values())):g}"
    else:
        default = "defaults " + ", ".join(f"{label} {value:g}" for label, value in defaults.items())
    return f"{what} of {users}{rule} ({default})"


def methods_text():
    """One line per method: its name, its label (the table's), summary and settings."""
    rows = [("all", "every method below that can run (the default)")]
    for method, spec in METHODS.items():
        options = ", ".join("--" + name.replace("_", "-") for name in spec.options)
        rows.append((method, f"{spec.label}: {spec.summary}"
                             + (f" [{options}]" if options else "")))
    width = max(len(method) for method, _ in rows) + 2
    return "\n".join(f"  {method:<{width}}" + summary for method, summary in rows)


def paragraphs(*texts):
    return "\n\n".join(textwrap.fill(text, 86) for text in texts)


def evaluate_notes():
    """The epilog of ``skqbnorm evaluate --help`` (read from the catalogue when called)."""
    dual = [method for method, spec in METHODS.items() if spec.data == "both banks"]
    by_input = {key: [m for m in dual if METHODS[m].gallery_bank_input == key]
                for key in ("gallery_bank", "querybank_to_gallery_bank")}
    return f"""\
methods (--method, case-insensitive; several comma-separated, e.g. dis,csls):
{methods_text()}

""" + paragraphs(
        "Every input is checked before anything is computed; a bad one ends in one line on "
        "stderr and exit status 2. --save never writes onto an input (also through links), "
        "nor onto an existing file unless --force is given: it writes a temporary file in "
        "the target's folder, checked writable before the evaluation, and moves it into "
        "place at the end; the temporary file is removed when the run stops first (an "
        "error, Ctrl-C: exit status 130, SIGTERM: 143).",
        "Inputs are similarities (--sims, --bank-sims and, for the dual-bank methods, "
        "--gallery-bank-sims or --bank-gallery-bank-sims) or embeddings (--queries, "
        "--gallery, --bank and --gallery-bank, one row per item), compared by --metric "
        "(cosine by default, or dot). Without --gt query i's correct item is gallery item "
        "i (a note on stderr says so, and a warning when raw R@1 is then near chance: the "
        "gallery may be shuffled). A gallery bank that no chosen method uses is refused.",
        f"--method all with the default k skips CSLS (k={class_default('csls', 'k')}) when "
        f"the gallery or the querybank has fewer than {class_default('csls', 'k')} items, "
        f"and NNN (k={class_default('nnn', 'k')}) when the querybank has fewer than "
        f"{class_default('nnn', 'k')} queries; without --gallery-bank-sims it skips "
        f"{' and '.join(by_input['gallery_bank'])} (they would equal "
        f"{' and '.join(METHODS[m].single_bank for m in by_input['gallery_bank'])}), without "
        f"--bank-gallery-bank-sims {' and '.join(by_input['querybank_to_gallery_bank'])} (it "
        "would equal sn). Each skip is a note on stderr; an explicit --k that is too large, "
        "or a method named with --method that cannot run, is an error.",
        "Every method's row also gives its change against raw similarities (the row of raw "
        "similarities is the baseline) in R@1, R@5, R@10, MdR, MnR and mAP, each with a "
        f"{CONFIDENCE:.0%} paired percentile bootstrap interval over --bootstrap resamples "
        "of the queries (the same resamples for every method), and for each R@K the exact "
        "McNemar p-value of the queries only one of the two retrieves; the table shows "
        "R@1's, json and csv all of them (to 12 significant digits). Choose a method on "
        "validation queries, not on these: the best row's interval, picked here, is biased.",
        "SN stops after --n-iter iterations: when its marginals are not yet within its "
        "tolerance, a note on stderr (also with --quiet) says how far off they are; the "
        "scores are those of the last iteration. dsl-transductive normalises over the test "
        "queries of --sims, so each score depends on the other test queries: a fair "
        "comparison only with other transductive methods. A hyperparameter not given keeps "
        "the default of its skqbnorm class; one that no chosen method takes is refused.",
    ) + "\n"


class OneLineParser(argparse.ArgumentParser):
    """argparse, its errors in one line on stderr (exit status 2), as every other error."""

    def error(self, message):
        message = " ".join(message.splitlines())  # an argument may hold a newline
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser():
    parser = OneLineParser(
        prog="skqbnorm", description="Hubness-aware retrieval: querybank normalisation."
    )
    parser.add_argument("--version", action="version", version=f"skqbnorm {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="every normaliser, with an in-domain and a far-domain querybank, on the "
                     "bundled WordNet reverse dictionary"
    )
    evaluate_ = commands.add_parser(
        "evaluate", help="normalise and score your own similarity matrices or embeddings",
        epilog=evaluate_notes(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = evaluate_.add_argument
    add("--sims", help="query x gallery similarities (.npy or .npz)")
    add("--bank-sims", help="querybank x gallery similarities (.npy or .npz)")
    add("--gallery-bank-sims", metavar="GALLERY_BANK_SIMS",
        help="gallery-bank x gallery similarities (.npy or .npz): samples of the gallery's "
             "modality that are not in the gallery, for dbnorm and dbnorm-dynamic")
    add("--bank-gallery-bank-sims", metavar="BANK_GALLERY_BANK_SIMS",
        help="querybank x gallery-bank similarities (.npy or .npz), one row per --bank-sims "
             "row, for dbsn")
    add("--queries", metavar="QUERIES.npy",
        help="query embeddings, one row per query (instead of --sims)")
    add("--gallery", metavar="GALLERY.npy", help="gallery embeddings, one row per item")
    add("--bank", metavar="BANK.npy",
        help="querybank embeddings, one row per bank query (instead of --bank-sims)")
    add("--gallery-bank", metavar="GALLERY_BANK.npy",
        help="gallery-bank embeddings, for the dual-bank methods (instead of "
             "--gallery-bank-sims and --bank-gallery-bank-sims)")
    add("--metric", choices=("cosine", "dot"), type=str.lower,
        help="how embeddings are compared (default cosine: rows scaled to unit length)")
    add("--gt", help="correct gallery index per query, or a 0/1 relevance matrix of the shape "
                     "of --sims (.npy/.npz; whole-number floats accepted); default: the diagonal")
    add("--method", default="all", type=chosen_methods, metavar="METHOD[,METHOD...]",
        help="normalisers, listed below, case-insensitive and comma-separated (default: all)")
    add("--beta", type=positive_float, help=option_help("beta", "inverse temperature", ", > 0"))
    add("--k", type=positive_int,
        help=option_help("k", "k", ", >= 1; it must not exceed the gallery (DIS, CSLS, "
                                   "DBNorm (dynamic)) nor the querybank (CSLS, NNN)"))
    add("--alpha", type=non_negative_float, help=option_help("alpha", "bias weight", ", >= 0"))
    add("--beta1", type=positive_float,
        help=option_help("beta1", "querybank inverse temperature", ", > 0"))
    add("--beta2", type=positive_float,
        help=option_help("beta2", "gallery-bank inverse temperature", ", > 0"))
    add("--tau", type=positive_float, help=option_help("tau", "temperature", ", > 0"))
    add("--n-iter", type=positive_int,
        help=option_help("n_iter", "largest number of iterations", ", >= 1"))
    add("--temperature", type=positive_float,
        help=option_help("temperature", "temperature", ", > 0"))
    add("--save", metavar="OUT.npy",
        help="write the normalised matrix of --method to this file (.npy is appended when "
             "missing; an input or a folder is refused, an existing file unless --force)")
    add("--force", action="store_true",
        help="let --save replace an existing file (never an input)")
    for command in (demo, evaluate_):
        command.add_argument("--format", default="table", choices=("table", "json", "csv"))
        command.add_argument(
            "--bootstrap", type=non_negative_int, default=1000, metavar="N",
            help="resamples of the paired bootstrap interval of each method's change against "
                 f"raw similarities ({CONFIDENCE:.0%}%, percentile; default 1000; 0: changes "
                 "and McNemar's p without intervals)")
        command.add_argument(
            "--seed", type=non_negative_int, default=0,
            help="seed of the resamples, the same for every method (default 0)")
        command.add_argument("--quiet", action="store_true",
                             help="no progress output on stderr, nor the note on an assumed "
                                  "--gt (notes on skipped or unconverged methods, and "
                                  "warnings, stay)")
    demo.set_defaults(run=run_demo)
    evaluate_.set_defaults(run=run_evaluate)
    return parser


#: Exit statuses of a run stopped by a signal, as a shell reports a command it killed.
INTERRUPTED, TERMINATED = 128 + 2, 128 + 15


def main(argv=None):
    """Run ``skqbnorm``; the exit status (0, 2 for a bad input, 130 on Ctrl-C, 143 on
    SIGTERM during ``--save``, 141 on a closed pipe)."""
    prog = "skqbnorm"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        prog = f"skqbnorm {args.command}"
        try:
            status = args.run(args)
        except CommandError as error:
            message = " ".join(str(error).split())
            parser.exit(2, f"{prog}: error: {message}\n")
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        return closed_pipe()
    except KeyboardInterrupt:
        return stopped(f"{prog}: interrupted (Ctrl-C).", INTERRUPTED)
    except Terminated:
        return stopped(f"{prog}: terminated (SIGTERM).", TERMINATED)


def stopped(line, status):
    """One line on stderr for a run stopped by a signal; its exit status."""
    try:
        print(line, file=sys.stderr)
    except (OSError, ValueError):
        pass
    return status


def closed_pipe():
    """``skqbnorm demo | head -1``: the reader left. Quiet, as a shell tool is (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
    except (OSError, ValueError, AttributeError):
        pass
    return 141
