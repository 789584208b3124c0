"""The ``skqbnorm`` command line: ``skqbnorm demo`` and ``skqbnorm evaluate``.

Every bad input ends in one line on stderr and exit status 2, and no input file is
ever written: inputs are checked (header against file size, dtype, shape, finite
values) before anything is computed, and ``--save`` writes a temporary file beside
its target, reserved before the evaluation, that replaces the target at the end.
"""

import argparse
import contextlib
import csv
import functools
import io
import json
import math
import sys
import textwrap
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import QueryBankGate, SinkhornNormalisation
from ._files import (
    CommandError,
    ReservedOutput,
    load_gt,
    load_similarities,
    output_path,
)
from .catalogue import (
    DEFAULTS,
    GALLERY_BANK_OPTIONS,
    METHODS,
    NO_BANK,
    Settings,
    class_default,
    describe,
    gated,
    make_normaliser,
)
from .metrics import QueryBankWarning, hubness, querybank_diagnostics
from .metrics._paired import compare_outcomes, metric_names, query_outcomes
from .metrics._retrieval import metrics_of_ranks

COLUMNS = ("R@1", "R@5", "R@10", "MdR", "MnR", "skewness")
#: The R@K cut-offs of the changes against raw similarities, and their interval's coverage.
CHANGE_KS = (1, 5, 10)
CONFIDENCE = 0.95
#: The fields of every method's change against raw similarities (None in raw's row).
CHANGE_FIELDS = tuple(
    f"{metric} {part}" for metric in metric_names(CHANGE_KS)
    for part in ("change", "change low", "change high", "McNemar p")
    if part != "McNemar p" or metric.startswith("R@")
)
# -- methods and evaluation -------------------------------------------------------------


def scores_of(method, normaliser, query_sims, bank_sims, gallery_bank):
    """The normalised scores of ``query_sims``, fitted on what the method uses."""
    data = METHODS[method].data
    if data == "nothing":
        return query_sims
    if data == "test queries":
        return normaliser.fit_transform(query_sims)
    if data == "gated querybank":
        return normaliser.fit(bank_sims, queries=query_sims).transform(query_sims)
    extra = {}
    if data == "both banks":
        key = METHODS[method].gallery_bank_input
        extra = {key: gallery_bank[key]}
    return normaliser.fit(bank_sims, **extra).transform(query_sims)


def scores_with_notes(method, normaliser, inputs, where, command):
    """:func:`scores_of`, a ConvergenceWarning told as one note on stderr.

    Other warnings pass on unchanged.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        warnings.simplefilter("always", QueryBankWarning)
        scores = scores_of(method, normaliser, *inputs)
    if isinstance(normaliser, QueryBankGate) and not normaliser.open_:
        gap = normaliser.diagnostics_.top1_ks
        note(f"skqbnorm {command}: note: {where}: the querybank looks out of domain for "
             f"these queries (top-1 KS distance {gap:.3f}): the gate left them raw.")
    for warning in caught:
        if issubclass(warning.category, QueryBankWarning):
            continue  # the gate's diagnostics: told once per bank (report_querybank)
        if issubclass(warning.category, ConvergenceWarning):
            note(f"skqbnorm {command}: note: {where}: "
                 f"{not_converged(normaliser, warning, command)}")
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno, source=warning.source)
    return scores


def not_converged(normaliser, warning, command):
    """What a ConvergenceWarning of ``normaliser`` means for its scores.

    SN's in the command line's terms; any other's in its own words.
    """
    if not isinstance(normaliser, SinkhornNormalisation):
        return " ".join(str(warning.message).split())
    options = "--n-iter or --tau" if command == "evaluate" else "n_iter or tau"
    return (
        f"did not converge in n_iter={normaliser.n_iter_} iterations (the plan's marginals "
        f"are off by up to {normaliser.marginal_error_:.3g}, tol={normaliser.tol:g}); its "
        f"scores are those of the last iteration. A larger {options} converges further."
    )


class ChangesAgainstRaw:
    """Each method's change against raw similarities, from a paired comparison.

    Called with every method's scores in turn, raw similarities first. Every
    comparison draws the same resamples (``seed``), so a method's interval does not
    depend on the other methods evaluated.
    """

    def __init__(self, gt, n_resamples, seed):
        self.gt, self.n_resamples, self.seed = gt, n_resamples, seed
        self.raw = None

    def __call__(self, method, outcomes):
        """The :data:`CHANGE_FIELDS` of ``method``'s row, from its :func:`query_outcomes`."""
        if method == "raw":
            self.raw = outcomes
            return dict.fromkeys(CHANGE_FIELDS)
        comparison = compare_outcomes(self.raw, outcomes, CHANGE_KS, self.n_resamples,
                                      CONFIDENCE, np.random.default_rng(self.seed))
        fields = {}
        for row in comparison.to_rows():
            metric = row["metric"]
            fields.update({f"{metric} change": row["change"], f"{metric} change low": row["low"],
                           f"{metric} change high": row["high"]})
            if metric.startswith("R@"):
                fields[f"{metric} McNemar p"] = row["p_value"]
        return fields


def evaluate(query_sims, gt, bank_sims, methods, settings=DEFAULTS, *, gallery_bank=None,
             bank_name=None, progress=None, command="evaluate", changes):
    """One row of retrieval metrics and hubness per method, and the last scores.

    With ``bank_name`` each row names its bank: ``bank_name``, or what a method that
    uses no querybank scores by (:data:`NO_BANK`). Each row also carries its
    :data:`CHANGE_FIELDS` from ``changes`` (a :class:`ChangesAgainstRaw`).
    """
    rows, scores = [], None
    for method in methods:
        start = time.perf_counter()
        normaliser = make_normaliser(method, settings)
        row = {} if bank_name is None else {
            "bank": NO_BANK.get(METHODS[method].data, bank_name)}
        row["method"] = describe(method, normaliser)
        where = " ".join(row.values())
        scores = scores_with_notes(method, normaliser, (query_sims, bank_sims, gallery_bank),
                                   where, command)
        outcomes = query_outcomes(scores, gt, CHANGE_KS)  # the ranks, once for both
        row.update(metrics_of_ranks(outcomes.ranks))
        row["skewness"] = hubness(scores, k=min(10, scores.shape[1]))["skewness"]
        row["seconds"] = time.perf_counter() - start
        row.update(changes(method, outcomes))
        rows.append(row)
        if progress:
            progress(f"  {where}: {row['seconds']:.2f} s")
    return rows, scores


def plan_methods(requested, args, n_bank, n_gallery, gallery_bank_inputs=()):
    """The requested methods that can run on these inputs.

    Under ``--method all``, a method that needs the absent ``--gallery-bank-sims``, or
    whose default k does not fit, is skipped with a note; a k the user gave, or a
    method asked for by name, is an error.
    """
    settings = settings_of(args)
    check_settings_apply(settings, requested, args.method)
    runnable = []
    for method in requested:
        normaliser = make_normaliser(method, settings)
        label = describe(method, normaliser)
        spec = METHODS[method]
        if spec.data == "both banks" and spec.gallery_bank_input not in gallery_bank_inputs:
            alone = METHODS[spec.single_bank].label
            option, what = GALLERY_BANK_OPTIONS[spec.gallery_bank_input]
            if args.method != "all":
                raise CommandError(
                    f"--method {method}: {label} needs {option}, {what}; without a gallery "
                    f"bank it equals {alone}."
                )
            note(f"skqbnorm evaluate: skipped {label}: it needs {option} "
                 f"(without a gallery bank it equals {alone}).")
            continue
        try:
            check_sizes(normaliser, n_bank, n_gallery)
        except ValueError as error:
            reason = f"{label}: {error}"
            if args.method != "all" or args.k is not None:
                hint = "" if args.k is not None else " Give a smaller --k."
                raise CommandError(f"{reason}{hint}") from error
            note(f"skqbnorm evaluate: skipped {reason} Give --k to run it with a smaller k.")
            continue
        runnable.append(method)
    return runnable


def check_settings_apply(settings, requested, chosen):
    """Refuse a setting that none of the requested methods takes: it would be ignored
    silently, and a typo (``--k`` for ``--beta``) go unnoticed."""
    taken = {name for method in requested for name in METHODS[method].options}
    for name, value in settings._asdict().items():
        if value is not None and name not in taken:
            users = [method for method, spec in METHODS.items() if name in spec.options]
            raise CommandError(
                f"--{name.replace('_', '-')} {value:g} is not a setting of --method {chosen}; "
                f"it sets {', '.join(users)}."
            )


def settings_of(args):
    return Settings(**{name: getattr(args, name, None) for name in Settings._fields})


def check_sizes(normaliser, n_bank, n_gallery):
    """The normaliser's own size check (k against the gallery and querybank), without data."""
    if normaliser is not None:
        gated(normaliser)._check_sizes(n_bank, n_gallery)


def format_rows(rows, style="table"):
    keys = [key for key in ("bank", "method") if key in rows[0]] + list(COLUMNS) + ["seconds"]
    keys += CHANGE_FIELDS
    if style == "json":
        return json.dumps([{key: row[key] for key in keys} for row in rows], indent=2)
    if style == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue().rstrip("\n")
    text_width = {key: max(len(key), *(len(str(row[key])) for row in rows))
                  for key in ("bank", "method") if key in rows[0]}
    header = "".join(f"{key:<{width + 2}}" for key, width in text_width.items())
    header += "".join(f"{'skew' if c == 'skewness' else c:>8}" for c in COLUMNS)
    header += f"{'R@1 change':>12}{f'{CONFIDENCE:.0%} interval':>16}{'McNemar p':>11}"
    lines = [header, "-" * len(header)]
    for row in rows:
        line = "".join(f"{row[key]!s:<{width + 2}}" for key, width in text_width.items())
        line += "".join(f"{row[c]:>8.2f}" if c == "skewness" else f"{row[c]:>8.1f}"
                        for c in COLUMNS)
        if row["R@1 change"] is not None:
            line += format_change(row, "R@1")
        lines.append(line.rstrip())
    return "\n".join(lines)


def format_change(row, metric):
    """The change of ``metric``, its interval (if resampled) and McNemar's p, for the table."""
    low, high = row[f"{metric} change low"], row[f"{metric} change high"]
    interval = "" if low is None else f"[{low:+.1f}, {high:+.1f}]"
    return f"{row[f'{metric} change']:>+12.1f}{interval:>16}{row[f'{metric} McNemar p']:>11.2g}"


# -- the commands -----------------------------------------------------------------------


def run_evaluate(args):
    if args.save is not None and args.method == "all":
        raise CommandError("--save writes one normalised matrix: choose one --method.")
    inputs = {"--sims": args.sims, "--bank-sims": args.bank_sims,
              "--gallery-bank-sims": args.gallery_bank_sims,
              "--bank-gallery-bank-sims": args.bank_gallery_bank_sims, "--gt": args.gt}
    output = reserve_output(args.save, inputs)
    with output:
        query_sims, bank_sims, gallery_bank, gt = load_inputs(args)
        requested = tuple(METHODS) if args.method == "all" else (
            tuple(dict.fromkeys(("raw", args.method))))
        given = [key for key, value in gallery_bank.items() if value is not None]
        methods = plan_methods(requested, args, *bank_sims.shape, given)
        progress = None if args.quiet else note
        report_querybank(query_sims, bank_sims, settings_of(args), args.quiet)
        try:
            rows, scores = evaluate(query_sims, gt, bank_sims, methods, settings_of(args),
                                    gallery_bank=gallery_bank, progress=progress,
                                    changes=ChangesAgainstRaw(gt, args.bootstrap, args.seed))
        except ValueError as error:
            raise CommandError(str(error)) from error
        except MemoryError as error:
            raise CommandError("ran out of memory during the evaluation.") from error
        written = output.commit(scores) if args.save is not None else None
    print(format_rows(rows, args.format))
    if written and progress:
        progress(f"wrote {written}: {scores.shape} {scores.dtype}")
    return 0


def report_querybank(query_sims, bank_sims, settings, quiet, command="evaluate"):
    """The querybank diagnostics on stderr; under --quiet only their warnings."""
    k = min(make_normaliser("dis", settings).k, query_sims.shape[1])
    try:
        report = querybank_diagnostics(bank_sims, query_sims, k=k, warn=False)
    except ValueError as error:
        raise CommandError(str(error)) from error
    if not quiet:
        note(str(report))
    else:
        for message in report.warnings:
            note(f"skqbnorm {command}: warning: {message}")


def reserve_output(save, inputs):
    """A :class:`ReservedOutput` for ``--save`` (a no-op context without it)."""
    if save is None:
        return contextlib.nullcontext()
    return ReservedOutput(output_path(save), inputs)


def load_inputs(args):
    """The query, querybank and gallery-bank (or None) similarities and gt, all checked."""
    query_sims = load_similarities(args.sims, "--sims")
    bank_sims = load_similarities(args.bank_sims, "--bank-sims")
    check_columns(query_sims, bank_sims, "--bank-sims")
    gallery_bank = dict.fromkeys(GALLERY_BANK_OPTIONS)
    if args.gallery_bank_sims is not None:
        sims = load_similarities(args.gallery_bank_sims, "--gallery-bank-sims")
        check_columns(query_sims, sims, "--gallery-bank-sims")
        gallery_bank["gallery_bank"] = sims
    if args.bank_gallery_bank_sims is not None:
        sims = load_similarities(args.bank_gallery_bank_sims, "--bank-gallery-bank-sims")
        if len(sims) != len(bank_sims):
            raise CommandError(
                f"--bank-gallery-bank-sims has shape {sims.shape}, but --bank-sims has "
                f"{len(bank_sims)} rows: it needs one row per querybank row (its columns are "
                "the gallery-bank items)."
            )
        gallery_bank["querybank_to_gallery_bank"] = sims
    if args.gt is None:
        return query_sims, bank_sims, gallery_bank, default_gt(query_sims.shape)
    return query_sims, bank_sims, gallery_bank, load_gt(args.gt, query_sims.shape)


def check_columns(query_sims, bank_sims, option):
    if bank_sims.shape[1] != query_sims.shape[1]:
        raise CommandError(
            f"--sims has shape {query_sims.shape} and {option} has shape "
            f"{bank_sims.shape}: both need one column per gallery item."
        )


def default_gt(shape):
    if shape[0] != shape[1]:
        raise CommandError(
            f"--sims has shape {shape}, not square: give --gt with the correct item per query."
        )
    return np.arange(shape[0])  # query i <-> gallery item i


def note(line):
    print(line, file=sys.stderr)


def run_demo(args):
    from .datasets import load_wordnet_revdict

    progress = None if args.quiet else note
    data = load_wordnet_revdict()
    if progress:
        progress(f"WordNet reverse dictionary: {len(data.query_gt)} definitions query "
                 f"{len(data.gallery_words)} nouns (all-MiniLM-L6-v2 embeddings)")
    gallery_t = data.gallery_embeddings.T
    query_sims = data.query_embeddings @ gallery_t
    gallery_bank_sims = data.gallery_bank_embeddings @ gallery_t
    bank_embeddings = {"in-domain": data.bank_embeddings, "far-domain": data.far_bank_embeddings}
    bankless = [method for method, spec in METHODS.items() if spec.data in NO_BANK]
    dual = " and ".join(spec.label for spec in METHODS.values() if spec.data == "both banks")
    changes = ChangesAgainstRaw(data.query_gt, args.bootstrap, args.seed)
    run = functools.partial(evaluate, query_sims, data.query_gt, progress=progress,
                            command="demo", changes=changes)
    rows = run(None, bankless, bank_name="(none)")[0]
    for bank_name, embeddings in bank_embeddings.items():
        if progress:
            progress(f"{bank_name} querybank: {len(embeddings)} queries (gallery bank: "
                     f"{len(gallery_bank_sims)} nouns, for {dual})")
        gallery_bank = {"gallery_bank": gallery_bank_sims,
                        "querybank_to_gallery_bank": embeddings @ data.gallery_bank_embeddings.T}
        banked = [method for method in METHODS if method not in bankless]
        bank_sims = embeddings @ gallery_t
        report_querybank(query_sims, bank_sims, DEFAULTS, args.quiet, "demo")
        rows += run(bank_sims, banked, bank_name=bank_name,
                    gallery_bank=gallery_bank)[0]
    print(format_rows(rows, args.format))
    return 0


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
    """One line per method: its name, summary and settings."""
    rows = [("all", "every method below that can run (the default)")]
    for method, spec in METHODS.items():
        options = ", ".join("--" + name.replace("_", "-") for name in spec.options)
        rows.append((method, spec.summary + (f" [{options}]" if options else "")))
    width = max(len(method) for method, _ in rows) + 2
    return "\n".join(f"  {method:<{width}}" + summary for method, summary in rows)


def paragraphs(*texts):
    return "\n\n".join(textwrap.fill(text, 86) for text in texts)


EVALUATE_NOTES = f"""\
methods (--method):
{methods_text()}

""" + paragraphs(
    "Every input is checked before anything is computed; a bad one ends in one line on "
    "stderr and exit status 2. --save never writes onto an input (also through links): it "
    "writes a temporary file in the target's folder, checked writable before the "
    "evaluation, and moves it into place at the end.",
    f"--method all with the default k skips CSLS (k={class_default('csls', 'k')}) when the "
    f"gallery or the querybank has fewer than {class_default('csls', 'k')} items, and NNN "
    f"(k={class_default('nnn', 'k')}) when the querybank has fewer than "
    f"{class_default('nnn', 'k')} queries; without --gallery-bank-sims it skips dual-is and "
    "dual-dis (they would equal is and dis), without --bank-gallery-bank-sims dbsn (it would "
    "equal sn). Each skip is a note on stderr; an explicit --k "
    "that is too large, or a method named with --method that cannot run, is an error.",
    "Every method's row also gives its change against raw similarities (the row of raw "
    "similarities is the baseline) in R@1, R@5, R@10, MdR, MnR and mAP, each with a "
    f"{CONFIDENCE:.0%} paired percentile bootstrap interval over --bootstrap resamples of the "
    "queries (the same resamples for every method), and for each R@K the exact McNemar "
    "p-value of the queries only one of the two retrieves; the table shows R@1's, json and "
    "csv all of them.",
    "SN stops after --n-iter iterations: when its marginals are not yet within its "
    "tolerance, a note on stderr (also with --quiet) says how far off they are; the scores "
    "are those of the last iteration. dsl-transductive normalises over the test queries of "
    "--sims, so each score depends on the other test queries: a fair comparison only with "
    "other transductive methods. A hyperparameter not given keeps the default of its "
    "skqbnorm class; one that no chosen method takes is refused.",
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
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="every normaliser, with an in-domain and a far-domain querybank, on the "
                     "bundled WordNet reverse dictionary"
    )
    evaluate_ = commands.add_parser(
        "evaluate", help="normalise and score your own similarity matrices",
        epilog=EVALUATE_NOTES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = evaluate_.add_argument
    add("--sims", required=True, help="query x gallery similarities (.npy or .npz)")
    add("--bank-sims", required=True, help="querybank x gallery similarities (.npy or .npz)")
    add("--gallery-bank-sims", metavar="GALLERY_BANK_SIMS",
        help="gallery-bank x gallery similarities (.npy or .npz): samples of the gallery's "
             "modality that are not in the gallery, for dual-is and dual-dis")
    add("--bank-gallery-bank-sims", metavar="BANK_GALLERY_BANK_SIMS",
        help="querybank x gallery-bank similarities (.npy or .npz), one row per --bank-sims "
             "row, for dbsn")
    add("--gt", help="correct gallery index per query, or a 0/1 relevance matrix of the shape "
                     "of --sims (.npy/.npz; whole-number floats accepted); default: the diagonal")
    add("--method", default="all", choices=("all", *METHODS), metavar="METHOD",
        help="normaliser, listed below (default: all)")
    add("--beta", type=positive_float, help=option_help("beta", "inverse temperature", ", > 0"))
    add("--k", type=positive_int,
        help=option_help("k", "k", ", >= 1; it must not exceed the gallery (DIS, CSLS, "
                                   "DualDIS) nor the querybank (CSLS, NNN)"))
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
             "missing; an input or a folder is refused)")
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
                             help="no progress output on stderr (notes on skipped or "
                                  "unconverged methods stay)")
    demo.set_defaults(run=run_demo)
    evaluate_.set_defaults(run=run_evaluate)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except CommandError as error:
        message = " ".join(str(error).split())
        parser.exit(2, f"skqbnorm {args.command}: error: {message}\n")
