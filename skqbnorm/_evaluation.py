"""The evaluation behind :func:`skqbnorm.compare` and ``skqbnorm evaluate``: one implementation.

Each method of the catalogue (:data:`skqbnorm.catalogue.METHODS`, read at call time,
so that a method registered later takes part) is fitted on what it uses, scores the
test queries, and gives one row: R@1, R@5, R@10, MdR, MnR, the hubness skewness and
its change against raw similarities with a paired bootstrap interval. Errors and
notes name the inputs in the words of the caller (:class:`Words`): the command
line's options or :func:`~skqbnorm.compare`'s parameters.
"""

import csv
import io
import math
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .catalogue import (
    DEFAULTS,
    GALLERY_BANK_OPTIONS,
    METHODS,
    NO_BANK,
    Settings,
    describe,
    inner_normalizer,
    make_normalizer,
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
#: Significant digits a table keeps: 35.099999999999994 is 35.1 (float noise, not data).
SIGNIFICANT_DIGITS = 12
#: Raw R@1 at most this many times chance, under an assumed diagonal gt, is warned about.
NEAR_CHANCE = 5


class Words(NamedTuple):
    """How errors and notes name things: the command line's options or compare's parameters.

    ``methods``: the methods argument; ``inputs``: each gallery-bank input's name;
    ``setting``: a hyperparameter's name from its setting name; ``command``: the
    command whose wording SN's convergence note uses ("evaluate", "demo" or "compare").
    """

    methods: str
    inputs: dict
    setting: Callable
    command: str


CLI_WORDS = Words("--method", {key: option for key, (option, _) in GALLERY_BANK_OPTIONS.items()},
                  lambda name: "--" + name.replace("_", "-"), "evaluate")
PYTHON_WORDS = Words("methods", {key: key for key in GALLERY_BANK_OPTIONS},
                     lambda name: f"params['{name}']", "compare")


def rounded(value):
    """``value`` to :data:`SIGNIFICANT_DIGITS` significant digits (None and ints unchanged)."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return value


def rounded_rows(rows):
    """``rows`` with every float :func:`rounded`."""
    return [{key: rounded(value) for key, value in row.items()} for row in rows]


def header_cells(confidence=CONFIDENCE):
    """The headers of the metric and change cells of :func:`row_cells`."""
    return ["skew" if column == "skewness" else column for column in COLUMNS] + [
        "R@1 change", f"{confidence:.0%} interval", "McNemar p"]


def row_cells(row):
    """A row's metrics and R@1 change as a table shows them (empty change cells in raw's)."""
    cells = [f"{row[c]:.2f}" if c == "skewness" else f"{row[c]:.1f}" for c in COLUMNS]
    if row["R@1 change"] is None:
        return cells + ["", "", ""]
    low, high = row["R@1 change low"], row["R@1 change high"]
    return cells + [f"{row['R@1 change']:+.1f}",
                    "" if low is None else f"[{low:+.1f}, {high:+.1f}]",
                    f"{row['R@1 McNemar p']:.2g}"]


def csv_text(rows, keys):
    """``rows`` (their ``keys``, floats :func:`rounded`) as csv text, header first."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rounded_rows(rows))
    return buffer.getvalue()


# -- which methods ----------------------------------------------------------------------


def resolve_methods(methods, words):
    """The catalogue keys ``methods`` names: "all", or names, case-insensitive and
    comma-separated in a string or given as a sequence; raw similarities come first."""
    names = method_names_given(methods, words)
    if names == ["all"]:
        return tuple(METHODS)
    keys = {key.lower(): key for key in METHODS}
    chosen = []
    for name in names:
        if name == "all":
            raise ValueError(f"{words.methods}: 'all' cannot be combined with other methods; "
                             f"got {methods!r}")
        if name not in keys:
            raise ValueError(
                f"{words.methods}: invalid choice: {name!r} (choose 'all' or one or more of "
                f"{', '.join(METHODS)}, comma-separated)")
        chosen.append(keys[name])
    return tuple(dict.fromkeys(["raw", *chosen])) if "raw" in METHODS else tuple(
        dict.fromkeys(chosen))


def method_names_given(methods, words):
    """The names in ``methods`` (a comma-separated string or a sequence of names),
    stripped and lower-cased; ``["all"]`` when it asks for every method."""
    if isinstance(methods, str):
        names = methods.split(",")
    elif isinstance(methods, Iterable) and not isinstance(methods, (bytes, Mapping)):
        names = list(methods)
    else:
        names = []
    if not names or any(not isinstance(name, str) for name in names):
        raise ValueError(f"{words.methods} must be 'all' or method names, in a comma-separated "
                         f"string or a sequence; got {words.methods}={methods!r}.")
    return [name.strip().lower() for name in names]


def plan_methods(requested, settings, n_bank, n_gallery, given_inputs, *, everything, words,
                 tell):
    """The requested methods that can run on these inputs.

    With ``everything`` (methods "all"), a method that needs an absent gallery-bank
    input, or whose default k does not fit, is skipped and ``tell("skipped", ...)``
    told; a k the caller gave, or a method asked for by name, is a ValueError.
    """
    check_settings_apply(settings, requested, words)
    runnable = []
    for method in requested:
        spec = METHODS[method]
        if spec.data in NO_BANK or spec.normalizer is None:
            runnable.append(method)
            continue
        if n_bank is None:
            if not everything:
                raise ValueError(f"{words.methods}: {spec.label} is fitted on a querybank: "
                                 f"give {'--bank-sims' if words is CLI_WORDS else 'bank_sims'}.")
            tell("skipped", f"{spec.label}: it needs a querybank.")
            continue
        normalizer = make_normalizer(method, settings)
        label = describe(method, normalizer)
        if spec.data == "both banks" and spec.gallery_bank_input not in given_inputs:
            alone = METHODS[spec.single_bank].label
            option = words.inputs[spec.gallery_bank_input]
            similarity_option, what = GALLERY_BANK_OPTIONS[spec.gallery_bank_input]
            if option != similarity_option:  # embedding input: one option for every bank
                what = "the gallery-bank embeddings"
            if not everything:
                raise ValueError(f"{words.methods} {method}: {label} needs {option}, {what}; "
                                 f"without a gallery bank it equals {alone}.")
            tell("skipped", f"{label}: it needs {option} (without a gallery bank it equals "
                            f"{alone}).")
            continue
        try:
            inner_normalizer(method, normalizer)._check_sizes(n_bank, n_gallery)
        except ValueError as error:
            reason = f"{label}: {error}"
            k_option = words.setting("k")
            if not everything or settings.k is not None:
                hint = "" if settings.k is not None else f" Give a smaller {k_option}."
                raise ValueError(f"{reason}{hint}") from error
            tell("skipped", f"{reason} Give {k_option} to run it with a smaller k.")
            continue
        runnable.append(method)
    return runnable


def check_settings_apply(settings, requested, words):
    """Refuse a setting that none of the requested methods takes: it would be ignored
    silently, and a typo (``--k`` for ``--beta``) go unnoticed."""
    taken = {name for method in requested for name in METHODS[method].options}
    for name, value in settings._asdict().items():
        if value is not None and name not in taken:
            users = [method for method, spec in METHODS.items() if name in spec.options]
            chosen = ",".join(method for method in requested if method != "raw") or "raw"
            raise ValueError(
                f"{words.setting(name)} {value:g} is not a setting of {words.methods} "
                f"{chosen}; it sets {', '.join(users)}."
            )


def check_gallery_banks_used(requested, given_inputs, words):
    """Refuse a gallery-bank input that none of the requested methods uses (as an
    unused setting is refused): it would be ignored silently."""
    used = {METHODS[method].gallery_bank_input for method in requested
            if METHODS[method].data == "both banks"}
    for key in given_inputs:
        if key not in used:
            users = [method for method, spec in METHODS.items()
                     if spec.data == "both banks" and spec.gallery_bank_input == key]
            chosen = ",".join(method for method in requested if method != "raw") or "raw"
            raise ValueError(
                f"{words.inputs[key]} is not used by {words.methods} {chosen}; it is used by "
                f"{', '.join(users)}.")


# -- scoring ----------------------------------------------------------------------------


def scores_of(method, normalizer, query_sims, bank_sims, gallery_bank):
    """The normalised scores of ``query_sims``, fitted on what the method uses."""
    data = METHODS[method].data
    if data == "nothing":
        return query_sims
    if data == "test queries":
        return normalizer.fit_transform(query_sims)
    if data == "gated querybank":
        return normalizer.fit(bank_sims, queries=query_sims).transform(query_sims)
    extra = {}
    if data == "both banks":
        key = METHODS[method].gallery_bank_input
        extra = {key: gallery_bank[key]}
    return normalizer.fit(bank_sims, **extra).transform(query_sims)


def scores_with_notes(method, normalizer, inputs, where, words, tell):
    """:func:`scores_of`, a ConvergenceWarning told as one ``"converge"`` note.

    Other warnings pass on unchanged (the gate's QueryBankWarning is told once per
    bank, by :func:`querybank_report`).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        warnings.simplefilter("always", QueryBankWarning)
        scores = scores_of(method, normalizer, *inputs)
    if METHODS[method].gated and not normalizer.open_:
        report = normalizer.diagnostics_
        tell("note", f"{where}: the querybank looks out of domain for these queries (KS "
                     f"distance {report.depth_ks:.3f} at depth {report.depth}): the gate "
                     f"left them raw.")
    for warning in caught:
        if issubclass(warning.category, QueryBankWarning):
            continue
        if issubclass(warning.category, ConvergenceWarning):
            tell("converge", f"{where}: {not_converged(method, normalizer, warning, words.command)}")
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno, source=warning.source)
    return scores


def not_converged(method, normalizer, warning, command):
    """What a ConvergenceWarning of ``normalizer`` means for its scores.

    An iterative method's (``Method.iterative``, SN's) in the command line's terms
    (``command`` "evaluate") or the class's; any other's in its own words.
    """
    if not METHODS[method].iterative:
        return " ".join(str(warning.message).split())
    options = "--n-iter or --tau" if command == "evaluate" else "n_iter or tau"
    return (
        f"did not converge in n_iter={normalizer.n_iter_} iterations (the plan's marginals "
        f"are off by up to {normalizer.marginal_error_:.3g}, tol={normalizer.tol:g}); its "
        f"scores are those of the last iteration. A larger {options} converges further."
    )


class ChangesAgainstRaw:
    """Each method's change against raw similarities, from a paired comparison.

    Called with every method's scores in turn, raw similarities first. Every
    comparison draws the same resamples (``seed``), so a method's interval does not
    depend on the other methods evaluated.
    """

    def __init__(self, gt, n_resamples, seed, confidence=CONFIDENCE):
        self.gt, self.n_resamples, self.seed = gt, n_resamples, seed
        self.confidence = confidence
        self.raw = None

    def __call__(self, method, outcomes):
        """The :data:`CHANGE_FIELDS` of ``method``'s row, from its :func:`query_outcomes`."""
        if method == "raw":
            self.raw = outcomes
            return dict.fromkeys(CHANGE_FIELDS)
        comparison = compare_outcomes(self.raw, outcomes, CHANGE_KS, self.n_resamples,
                                      self.confidence, np.random.default_rng(self.seed))
        fields = {}
        for row in comparison.to_rows():
            metric = row["metric"]
            fields.update({f"{metric} change": row["change"], f"{metric} change low": row["low"],
                           f"{metric} change high": row["high"]})
            if metric.startswith("R@"):
                fields[f"{metric} McNemar p"] = row["p_value"]
        return fields


def method_rows(query_sims, gt, bank_sims, methods, settings=DEFAULTS, *, gallery_bank=None,
                bank_name=None, progress=None, words=CLI_WORDS, tell, changes):
    """One row of retrieval metrics and hubness per method, and the last scores.

    With ``bank_name`` each row names its bank: ``bank_name``, or what a method that
    uses no querybank scores by (:data:`NO_BANK`). Each row also carries its
    :data:`CHANGE_FIELDS` from ``changes`` (a :class:`ChangesAgainstRaw`). The
    values are as computed: :func:`rounded_rows` rounds them for a table or a file.
    """
    rows, scores = [], None
    for method in methods:
        start = time.perf_counter()
        normalizer = make_normalizer(method, settings)
        row = {} if bank_name is None else {
            "bank": NO_BANK.get(METHODS[method].data, bank_name)}
        row["method"] = describe(method, normalizer)
        where = " ".join(row.values())
        scores = scores_with_notes(method, normalizer, (query_sims, bank_sims, gallery_bank),
                                   where, words, tell)
        scores = check_method_scores(scores, query_sims.shape, f"{words.methods} {method}: {where}")
        outcomes = query_outcomes(scores, gt, CHANGE_KS)  # the ranks, once for both
        row.update(metrics_of_ranks(outcomes.ranks))
        row["skewness"] = hubness(scores, k=min(10, scores.shape[1]))["skewness"]
        row["seconds"] = time.perf_counter() - start
        row.update(changes(method, outcomes))
        rows.append(row)
        if progress:
            progress(f"  {where}: {row['seconds']:.2f} s")
    return rows, scores


def check_method_scores(scores, shape, who):
    """The scores a method returned, as an array, or a ValueError naming the method
    (``who``) when they cannot be ranked: the similarities it was given were checked."""
    try:
        scores = np.asarray(scores)
    except (ValueError, TypeError) as error:  # ragged rows
        raise ValueError(f"{who} returned scores that are no array: {error}") from None
    if scores.shape != tuple(shape):
        raise ValueError(f"{who} returned scores of shape {scores.shape}; a method scores "
                         f"each query against each gallery item, shape {tuple(shape)}.")
    if not (np.issubdtype(scores.dtype, np.number) or scores.dtype == bool) or np.iscomplexobj(
            scores):
        raise ValueError(f"{who} returned scores of dtype {scores.dtype}, not real numbers.")
    finite = np.isfinite(scores)
    if not finite.all():
        query, item = np.argwhere(~finite)[0]
        raise ValueError(
            f"{who} returned {np.count_nonzero(~finite)} non-finite scores from finite "
            f"similarities (the first, {scores[query, item]}, at query {query}, gallery item "
            f"{item}).")
    return scores


def near_chance(rows, n_gallery):
    """The warning for raw R@1 at most :data:`NEAR_CHANCE` times chance, or None."""
    raw = [row for row in rows if row["method"] == METHODS["raw"].label]
    chance = 100.0 / n_gallery
    if not raw or NEAR_CHANCE * chance >= 100 or raw[0]["R@1"] > NEAR_CHANCE * chance:
        return None
    return (f"raw R@1 is {raw[0]['R@1']:.3g}%, near chance ({chance:.3g}% for "
            f"{n_gallery} gallery items), with query i's correct item taken to be gallery "
            "item i: the gallery may be shuffled relative to the queries; give the correct "
            "item per query")


def diagonal_gt(shape, where):
    """Query i's correct item is gallery item i: ``where`` names the similarities."""
    if shape[0] != shape[1]:
        raise ValueError(
            f"{where} has shape {tuple(shape)}, not square: give gt, the correct item per "
            "query.")
    return np.arange(shape[0])


def querybank_report(query_sims, bank_sims, settings=DEFAULTS, warn=False):
    """The querybank diagnostics at DIS's k (the gallery's size if smaller)."""
    k = min(make_normalizer("dis", settings).k, query_sims.shape[1])
    return querybank_diagnostics(bank_sims, query_sims, k=k, warn=warn)


def settings_from(params, words):
    """The :class:`Settings` of a mapping of setting names to values, names checked."""
    if params is not None and not isinstance(params, Mapping):
        raise ValueError(f"params must be a dict of setting names to values, such as "
                         f"{{'beta': 3}}; got params={params!r}.")
    params = {} if params is None else dict(params)
    unknown = [name for name in params if name not in Settings._fields]
    if unknown:
        raise ValueError(f"{words.setting(unknown[0])} is not a setting of any method; the "
                         f"settings are {', '.join(Settings._fields)}.")
    return Settings(**params)
