"""What ``skqbnorm demo`` and ``skqbnorm evaluate`` run: inputs, the evaluation, the table.

The evaluation itself is :mod:`skqbnorm._evaluation`'s, the one behind
:func:`skqbnorm.compare`; this module reads the files (similarities or embeddings),
turns every problem into a :class:`~skqbnorm._files.CommandError` naming the option,
and prints the rows.
"""

import contextlib
import functools
import json
import re
import sys

import numpy as np

from ._core import prepare_embeddings
from ._evaluation import (
    CHANGE_FIELDS,
    CLI_WORDS,
    COLUMNS,
    ChangesAgainstRaw,
    check_gallery_banks_used,
    csv_text,
    diagonal_gt,
    header_cells,
    method_rows,
    near_chance,
    plan_methods,
    querybank_report,
    resolve_methods,
    rounded_rows,
    row_cells,
)
from ._files import (
    CommandError,
    Expected,
    ReservedOutput,
    load_array,
    load_gt,
    load_similarities,
    output_path,
)
from .catalogue import DEFAULTS, GALLERY_BANK_OPTIONS, METHODS, NO_BANK, Settings

#: The embedding inputs: option -> what it holds.
EMBEDDING_OPTIONS = {"--queries": "the test queries", "--gallery": "the gallery",
                     "--bank": "the querybank", "--gallery-bank": "the gallery bank"}
EMBEDDINGS = Expected("fiu", (2,), "embeddings, one row per item (float or integer)")
SIMILARITY_OPTIONS = ("--sims", "--bank-sims", "--gallery-bank-sims", "--bank-gallery-bank-sims")
#: Embedding input's words: one option, --gallery-bank, gives every gallery-bank input.
EMBEDDING_WORDS = CLI_WORDS._replace(inputs=dict.fromkeys(GALLERY_BANK_OPTIONS, "--gallery-bank"))


def note(line):
    print(line, file=sys.stderr)


def teller(command):
    """The command line's ``tell``: every note one line on stderr."""
    def tell(kind, text):
        if kind == "skipped":
            note(f"skqbnorm {command}: skipped {text}")
        elif kind == "warning":
            note(f"skqbnorm {command}: warning: {text}")
        else:
            note(f"skqbnorm {command}: note: {text}")
    return tell


def chosen_methods(text):
    """The catalogue keys of ``--method`` (argparse's type: it reads METHODS when called)."""
    import argparse

    try:
        return resolve_methods(text, CLI_WORDS)
    except ValueError as error:
        message = str(error).removeprefix("--method: ")
        raise argparse.ArgumentTypeError(message) from None


def settings_of(args):
    return Settings(**{name: getattr(args, name, None) for name in Settings._fields})


# -- evaluate ---------------------------------------------------------------------------


def run_evaluate(args):
    everything = args.method == tuple(METHODS)
    if args.save is not None and (everything or len(args.method) > 2):
        raise CommandError("--save writes one normalised matrix: choose one --method.")
    if args.force and args.save is None:
        raise CommandError("--force lets --save replace an existing file; it needs --save.")
    embedding_mode = check_input_mode(args)
    settings = settings_of(args)
    tell = teller("evaluate")
    with reserve_output(args.save, input_paths(args), args.force) as output:
        query_sims, bank_sims, gallery_bank = (load_embedding_inputs(args) if embedding_mode
                                               else load_similarity_inputs(args))
        gt = load_or_assume_gt(args, query_sims.shape, embedding_mode)
        given = [key for key, value in gallery_bank.items() if value is not None]
        try:
            if embedding_mode and args.gallery_bank is not None:
                given = used_gallery_bank_inputs(args.method)
                gallery_bank = {key: gallery_bank[key] if key in given else None
                                for key in gallery_bank}
            words = EMBEDDING_WORDS if embedding_mode else CLI_WORDS
            methods = plan_methods(args.method, settings, *bank_sims.shape, given,
                                   everything=everything, words=words, tell=tell)
            check_gallery_banks_used(args.method, given, words)
        except ValueError as error:
            raise CommandError(str(error)) from error
        progress = None if args.quiet else note
        if args.gt is None and progress:
            assumed_gt_note(embedding_mode)
        report_querybank(query_sims, bank_sims, settings, args.quiet)
        try:
            rows, scores = method_rows(query_sims, gt, bank_sims, methods, settings,
                                       gallery_bank=gallery_bank, progress=progress, tell=tell,
                                       changes=ChangesAgainstRaw(gt, args.bootstrap, args.seed))
        except ValueError as error:
            raise CommandError(blame_settings(str(error), settings)) from error
        except MemoryError as error:
            raise CommandError("ran out of memory during the evaluation.") from error
        written = output.commit(scores) if args.save is not None else None
    if args.gt is None:
        chance = near_chance(rows, query_sims.shape[1])
        if chance:
            tell("warning", f"{chance} with --gt.")
    print(format_rows(rows, args.format))
    if written and progress:
        progress(f"wrote {written}: {scores.shape} {scores.dtype}")
    return 0


def blame_settings(message, settings):
    """``message`` led by the options it names; an overflow with settings given, by those.

    A hyperparameter (``--alpha 1e308``, ``--temperature 1e-300``) can overflow the
    scores of finite similarities: the error then names the option, not only the data.
    """
    given = {name: f"--{name.replace('_', '-')} {value:g}"
             for name, value in settings._asdict().items() if value is not None}
    named = [option for name, option in given.items()
             if re.search(rf"(?<![A-Za-z0-9_]){name}(?![A-Za-z0-9_])", message)]
    if named:
        return f"{', '.join(named)}: {message}"
    if given and "overflow" in message:
        options = ", ".join(given.values())
        return (f"{options}: {message} The option{'s' if len(given) > 1 else ''} given ("
                f"{options}) can cause this: try "
                f"{'their defaults' if len(given) > 1 else 'its default'}.")
    return message


def used_gallery_bank_inputs(requested):
    """The gallery-bank inputs the requested methods use; --gallery-bank refused if none."""
    used = [key for key in GALLERY_BANK_OPTIONS
            if any(METHODS[m].data == "both banks" and METHODS[m].gallery_bank_input == key
                   for m in requested)]
    if not used:
        users = [m for m, spec in METHODS.items() if spec.data == "both banks"]
        chosen = ",".join(m for m in requested if m != "raw") or "raw"
        raise ValueError(f"--gallery-bank is not used by --method {chosen}; it is used by "
                         f"{', '.join(users)}.")
    return used


def check_input_mode(args):
    """True for embeddings (--queries, --gallery, --bank), False for similarities."""
    sims = [option for option in SIMILARITY_OPTIONS if option_value(args, option) is not None]
    embeddings = [option for option in EMBEDDING_OPTIONS
                  if option_value(args, option) is not None]
    if sims and embeddings:
        raise CommandError(f"{sims[0]} and {embeddings[0]} cannot be combined: give "
                           "similarities (--sims, --bank-sims) or embeddings (--queries, "
                           "--gallery, --bank), not both.")
    if embeddings:
        missing = [option for option in ("--queries", "--gallery", "--bank")
                   if option_value(args, option) is None]
        if missing:
            raise CommandError(f"embedding input needs {', '.join(missing)} too: --queries, "
                               "--gallery and --bank give the query, gallery and querybank "
                               "embeddings.")
        return True
    if args.metric is not None:
        raise CommandError(f"--metric {args.metric} applies to embeddings (--queries, "
                           "--gallery, --bank); --sims are similarities already.")
    missing = [option for option in ("--sims", "--bank-sims") if option_value(args, option) is None]
    if missing:
        raise CommandError(f"give {' and '.join(missing)} (similarities), or --queries, "
                           "--gallery and --bank (embeddings).")
    return False


def option_value(args, option):
    return getattr(args, option.lstrip("-").replace("-", "_"))


def input_paths(args):
    return {option: option_value(args, option)
            for option in (*SIMILARITY_OPTIONS, *EMBEDDING_OPTIONS, "--gt")}


def load_similarity_inputs(args):
    """The query, querybank and gallery-bank (or None) similarities, all checked."""
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
    return query_sims, bank_sims, gallery_bank


def load_embedding_inputs(args):
    """The similarities of the embeddings under --metric: queries, querybank and the
    gallery bank's two (gallery bank x gallery, querybank x gallery bank)."""
    embeddings = {option: load_embeddings(option_value(args, option), option, args.metric)
                  for option in EMBEDDING_OPTIONS if option_value(args, option) is not None}
    dims = {option: array.shape[1] for option, array in embeddings.items()}
    if len(set(dims.values())) > 1:
        shapes = ", ".join(f"{option} {array.shape}" for option, array in embeddings.items())
        raise CommandError(f"the embeddings differ in dimension ({shapes}): every row needs "
                           "the same number of columns.")
    products = {"gallery_bank": ("--gallery-bank", "--gallery"),
                "querybank_to_gallery_bank": ("--bank", "--gallery-bank"),
                "query_sims": ("--queries", "--gallery"), "bank_sims": ("--bank", "--gallery")}
    sims = {key: similarities(embeddings, rows, columns, args.metric)
            for key, (rows, columns) in products.items()
            if rows in embeddings and columns in embeddings}
    gallery_bank = {key: sims.get(key) for key in GALLERY_BANK_OPTIONS}
    return sims["query_sims"], sims["bank_sims"], gallery_bank


def similarities(embeddings, rows, columns, metric):
    """``rows @ columns.T``, refused when finite embeddings overflow (--metric dot)."""
    with np.errstate(over="ignore", invalid="ignore"):
        product = embeddings[rows] @ embeddings[columns].T
    if not np.isfinite(product).all():
        raise CommandError(
            f"{rows} x {columns}: the similarities of these embeddings overflow "
            f"{product.dtype} under --metric {metric or 'cosine'}; scale the embeddings "
            "down (or use --metric cosine).")
    return product


def load_embeddings(path, option, metric):
    """Non-empty, finite embeddings in float32 or float64, rows unit-length for cosine
    (prepared as the normalizers prepare embeddings)."""
    array = load_array(path, option, EMBEDDINGS)
    where = f"{option} {path}"
    if 0 in array.shape:
        raise CommandError(f"{where}: has shape {array.shape}; it needs at least one row and "
                           "one column.")
    dtype = np.float32 if array.dtype in (np.float32, np.float16) else np.float64
    array = np.asarray(array, dtype=dtype)
    finite = np.isfinite(array)
    if not finite.all():
        row, column = np.argwhere(~finite)[0]
        raise CommandError(f"{where}: row {row}, column {column} is {array[row, column]}; every "
                           "embedding value must be finite.")
    if (metric or "cosine") == "dot":
        return array
    largest = np.abs(array).max(axis=1, keepdims=True)
    if not largest.all():
        row = int(np.flatnonzero(largest[:, 0] == 0)[0])
        raise CommandError(f"{where}: row {row} has norm 0: --metric cosine needs rows of "
                           "non-zero length (or give --metric dot).")
    return prepare_embeddings(array, "cosine")  # as the normalizers' embedding mode does


def check_columns(query_sims, bank_sims, option):
    if bank_sims.shape[1] != query_sims.shape[1]:
        raise CommandError(
            f"--sims has shape {query_sims.shape} and {option} has shape "
            f"{bank_sims.shape}: both need one column per gallery item."
        )


def load_or_assume_gt(args, shape, embedding_mode):
    """--gt, checked; without it the diagonal (:func:`assumed_gt_note` says so)."""
    if args.gt is not None:
        return load_gt(args.gt, shape, "--queries" if embedding_mode else "--sims")
    what = "--queries x --gallery" if embedding_mode else "--sims"
    try:
        gt = diagonal_gt(shape, what)
    except ValueError:
        raise CommandError(f"{what} has shape {shape}, not square: give --gt with the correct "
                           "item per query.") from None
    return gt


def assumed_gt_note(embedding_mode):
    what = "--queries x --gallery" if embedding_mode else "--sims"
    note(f"skqbnorm evaluate: note: no --gt: query i's correct item is taken to be gallery "
         f"item i (the diagonal of {what}).")


def report_querybank(query_sims, bank_sims, settings, quiet, command="evaluate"):
    """The querybank diagnostics on stderr; under --quiet only their warnings."""
    try:
        report = querybank_report(query_sims, bank_sims, settings)
    except ValueError as error:
        raise CommandError(str(error)) from error
    if not quiet:
        note(str(report))
    else:
        for message in report.warnings:
            note(f"skqbnorm {command}: warning: {message}")


def reserve_output(save, inputs, force=False):
    """A :class:`ReservedOutput` for ``--save`` (a no-op context without it); an
    existing file is replaced only with ``force`` (``--force``)."""
    if save is None:
        return contextlib.nullcontext()
    return ReservedOutput(output_path(save), inputs, force)


# -- demo -------------------------------------------------------------------------------


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
    run = functools.partial(method_rows, query_sims, data.query_gt, progress=progress,
                            words=CLI_WORDS._replace(command="demo"), tell=teller("demo"),
                            changes=changes)
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
        rows += run(bank_sims, banked, bank_name=bank_name, gallery_bank=gallery_bank)[0]
    print(format_rows(rows, args.format))
    return 0


# -- output -----------------------------------------------------------------------------


def format_rows(rows, style="table"):
    keys = [key for key in ("bank", "method") if key in rows[0]] + list(COLUMNS) + ["seconds"]
    keys += CHANGE_FIELDS
    if style == "json":
        return json.dumps([{key: row[key] for key in keys} for row in rounded_rows(rows)],
                          indent=2)
    if style == "csv":
        return csv_text(rows, keys).rstrip("\n")
    text_width = {key: max(len(key), *(len(str(row[key])) for row in rows))
                  for key in ("bank", "method") if key in rows[0]}
    widths = [8] * len(COLUMNS) + [12, 16, 11]  # metrics, R@1 change, interval, McNemar p
    header = "".join(f"{key:<{width + 2}}" for key, width in text_width.items())
    header += "".join(cell.rjust(width) for cell, width in zip(header_cells(), widths))
    lines = [header, "-" * len(header)]
    for row in rows:
        line = "".join(f"{row[key]!s:<{width + 2}}" for key, width in text_width.items())
        line += "".join(cell.rjust(width) for cell, width in zip(row_cells(row), widths))
        lines.append(line.rstrip())
    return "\n".join(lines)
