"""``skqbnorm.compare``: every normaliser of the catalogue on your matrices, with intervals."""

import html
import warnings

from sklearn.exceptions import ConvergenceWarning

from ._evaluation import (
    CHANGE_FIELDS,
    COLUMNS,
    CONFIDENCE,
    PYTHON_WORDS,
    ChangesAgainstRaw,
    check_gallery_banks_used,
    csv_text,
    diagonal_gt,
    header_cells,
    method_names_given,
    method_rows,
    near_chance,
    plan_methods,
    querybank_report,
    resolve_methods,
    rounded_rows,
    row_cells,
    settings_from,
)
from ._validation import check_int, check_real, check_sims
from .metrics import QueryBankWarning
from .metrics._paired import _check_confidence

#: The columns of :func:`compare`'s table, in order.
TABLE_COLUMNS = ("method", *COLUMNS, "seconds", *CHANGE_FIELDS)


def compare(query_sims, gt=None, *, bank_sims=None, methods="all", gallery_bank=None,
            querybank_to_gallery_bank=None, params=None, n_resamples=1000,
            confidence=CONFIDENCE, random_state=0, as_frame=None):
    """Every normaliser of the catalogue on the same queries, with paired intervals.

    The Python form of ``skqbnorm evaluate``, and the same computation: each method
    of :data:`skqbnorm.catalogue.METHODS` (read when called, so a method registered
    later takes part) is fitted on what it uses (the querybank, both banks, the
    querybank through a :class:`~skqbnorm.QueryBankGate`, or, for the transductive
    dual softmax, the test queries themselves), scores ``query_sims`` and gives one
    row: R@1, R@5, R@10, MdR, MnR, the hubness skewness of its top-10 occurrences,
    and its change against raw similarities in R@1, R@5, R@10, MdR, MnR and mAP,
    each with a paired percentile bootstrap interval (the same resamples for every
    method) and, for each R@K, the exact McNemar p-value.

    **Tuning protocol.** Choose a method and its hyperparameters on data that is
    not the test queries: a validation split of your queries, or a held-out part of
    the querybank used as queries (the user guide's examples split the querybank,
    never the test queries). Then run the chosen method once on the test queries and
    report that row and its interval. Picking the best row of this table on the
    test queries and reporting its interval biases that interval upwards: the
    maximum of many noisy changes is larger than the change of the method it
    picks, and its interval no longer covers at its stated level. To compare
    several methods on the test queries, report every row (this table), not the
    best one; to select, select on validation queries and confirm on test ones.

    Parameters
    ----------
    query_sims : array-like of shape (n_queries, n_gallery)
        Finite similarities of the test queries to the gallery.
    gt : array-like of shape (n_queries,) or (n_queries, n_gallery), default=None
        The correct gallery index per query, or a 0/1 relevance matrix. None takes
        query ``i``'s correct item to be gallery item ``i`` (the diagonal; needs a
        square ``query_sims``) and warns when raw R@1 is then at most five times
        chance: the gallery may be shuffled relative to the queries.
    bank_sims : array-like of shape (n_bank, n_gallery), default=None
        The querybank's similarities to the gallery. Without it only the methods
        that use no querybank run (raw similarities, the transductive dual softmax).
    methods : "all", str or sequence of str, default="all"
        Catalogue names, case-insensitive, in a sequence or comma-separated
        (``"dis,csls"``); raw similarities always come first, as the baseline.
        Under "all" a method that cannot run on these inputs (it needs an absent
        gallery bank, or its default k exceeds the gallery or the querybank) is
        left out and named in ``attrs["skipped"]``; one named is an error.
    gallery_bank : array-like of shape (n_gallery_bank, n_gallery), default=None
        Gallery-bank similarities to the gallery, for DBNorm and its dynamic form.
        Refused when no chosen method uses it.
    querybank_to_gallery_bank : array-like of shape (n_bank, n_gallery_bank), default=None
        The querybank's similarities to the gallery bank, for DBSN. Refused when no
        chosen method uses it.
    params : dict, default=None
        Hyperparameters by setting name (``beta``, ``k``, ``alpha``, ``beta1``,
        ``beta2``, ``tau``, ``n_iter``, ``temperature``), each given to every chosen
        method that takes it; one that no chosen method takes is refused. A method
        not given one keeps its class default.
    n_resamples : int, default=1000
        Bootstrap resamples of the queries, ``>= 0``; 0 gives the changes and
        McNemar's p without intervals.
    confidence : float, default=0.95
        Coverage of the percentile intervals, in (0, 1).
    random_state : int, default=0
        Seed of the resamples, the same for every method, so that a method's
        interval does not depend on which other methods run.
    as_frame : bool or None, default=None
        True: a pandas DataFrame; False: a :class:`ComparisonTable`; None: a
        DataFrame when pandas can be imported, else a :class:`ComparisonTable`.

    Returns
    -------
    table : pandas.DataFrame or ComparisonTable
        One row per method, the columns of ``TABLE_COLUMNS`` (R@K in percent, MdR
        and MnR 1-based, seconds of fit and transform; the change fields are None
        in raw's row), floats to 12 significant digits. ``attrs`` holds
        ``"querybank_diagnostics"`` (:func:`~skqbnorm.metrics.querybank_diagnostics`
        of ``bank_sims``, or None) and ``"skipped"`` (method name to the reason).

    Warns
    -----
    QueryBankWarning
        The querybank looks out of domain for the queries, or covers little of the
        gallery (as :func:`~skqbnorm.metrics.querybank_diagnostics`).
    ConvergenceWarning
        A method did not converge (Sinkhorn's iterations), naming the method.
    UserWarning
        A gated method left the queries raw; raw R@1 is near chance under the
        assumed diagonal ``gt``.

    See Also
    --------
    skqbnorm.metrics.paired_comparison : The change of two score matrices alone.

    Examples
    --------
    >>> from skqbnorm import compare
    >>> from skqbnorm.datasets import make_hubness_sims
    >>> sims, gt, bank = make_hubness_sims(300, 100, 500, random_state=0)
    >>> table = compare(sims, gt, bank_sims=bank, methods="IS, dis", n_resamples=200,
    ...                 as_frame=False)
    >>> table.columns[:4]
    ('method', 'R@1', 'R@5', 'R@10')
    >>> print(table)  # doctest: +NORMALIZE_WHITESPACE
    method               R@1   R@5  R@10  MdR   MnR  skew  R@1 change    95% interval  McNemar p
    raw similarities    20.0  75.0  87.3  3.0   6.7  0.96
    IS (beta=20)        52.3  74.7  77.7  1.0  13.0  1.26       +32.3  [+27.6, +39.0]    6.6e-20
    DIS (beta=20, k=1)  52.3  74.3  77.7  1.0  12.9  1.27       +32.3  [+27.3, +39.0]    2.6e-20
    >>> [row["method"] for row in table.rows]
    ['raw similarities', 'IS (beta=20)', 'DIS (beta=20, k=1)']
    """
    query_sims = check_sims(query_sims, "query_sims")
    inputs = {"gallery_bank": gallery_bank, "querybank_to_gallery_bank": querybank_to_gallery_bank}
    inputs = {key: check_sims(value, key) for key, value in inputs.items() if value is not None}
    bank = None if bank_sims is None else check_sims(bank_sims, "bank_sims")
    _check_columns(query_sims, {"bank_sims": bank, "gallery_bank": inputs.get("gallery_bank")})
    n_resamples = check_int(n_resamples, "n_resamples", low=0)
    confidence = _check_confidence(confidence)
    random_state = check_int(random_state, "random_state", low=0)
    if as_frame not in (None, True, False):
        raise ValueError(f"as_frame must be None, True or False; got as_frame={as_frame!r}.")
    settings = settings_from(params, PYTHON_WORDS)
    for name, value in settings._asdict().items():
        if value is not None:
            check_real(value, f"params['{name}']")
    requested = resolve_methods(methods, PYTHON_WORDS)
    check_gallery_banks_used(requested, inputs, PYTHON_WORDS)
    assumed = gt is None
    if assumed:
        gt = diagonal_gt(query_sims.shape, "query_sims")
    skipped = {}
    tell = _Teller(skipped)
    methods_run = plan_methods(requested, settings, None if bank is None else len(bank),
                               query_sims.shape[1], inputs,
                               everything=method_names_given(methods, PYTHON_WORDS) == ["all"],
                               words=PYTHON_WORDS, tell=tell)
    report = None if bank is None else querybank_report(query_sims, bank, settings, warn=True)
    rows, _ = method_rows(query_sims, gt, bank, methods_run, settings,
                          gallery_bank=inputs, words=PYTHON_WORDS, tell=tell,
                          changes=ChangesAgainstRaw(gt, n_resamples, random_state, confidence))
    if assumed:
        chance = near_chance(rows, query_sims.shape[1])
        if chance:
            warnings.warn(f"{chance} (gt).", UserWarning, stacklevel=2)
    table = ComparisonTable(rows, confidence)
    table.attrs.update(querybank_diagnostics=report, skipped=skipped)
    return table.to_frame() if as_frame or (as_frame is None and _has_pandas()) else table


class _Teller:
    """compare's notes: skipped methods into ``skipped``, the others as warnings."""

    CATEGORIES = {"converge": ConvergenceWarning, "note": UserWarning,
                  "warning": QueryBankWarning}

    def __init__(self, skipped):
        self.skipped = skipped

    def __call__(self, kind, text):
        if kind == "skipped":
            label, reason = text.split(": ", 1)
            self.skipped[label] = reason
        else:
            warnings.warn(text, self.CATEGORIES[kind], stacklevel=2)


def _check_columns(query_sims, others):
    for name, array in others.items():
        if array is not None and array.shape[1] != query_sims.shape[1]:
            raise ValueError(
                f"query_sims has shape {query_sims.shape} and {name} has shape {array.shape}: "
                "both need one column per gallery item.")


def _has_pandas():
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


class ComparisonTable:
    """:func:`compare`'s table without pandas: ``rows`` (one dict per method), ``columns``.

    ``str()`` and the notebook display round as ``skqbnorm evaluate``'s table does;
    :meth:`to_csv` writes every column; :meth:`to_frame` gives a pandas DataFrame.
    """

    def __init__(self, rows, confidence=CONFIDENCE):
        self.rows = [{column: row.get(column) for column in TABLE_COLUMNS}
                     for row in rounded_rows(rows)]
        self.columns = TABLE_COLUMNS
        self.confidence = confidence
        self.attrs = {}

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, column):
        """Every row's value of ``column``, as a list."""
        if column not in self.columns:
            raise KeyError(column)
        return [row[column] for row in self.rows]

    def to_csv(self, path_or_buf=None):
        """The table as csv (empty fields for None); written to ``path_or_buf`` if given."""
        text = csv_text(self.rows, self.columns)
        if path_or_buf is None:
            return text
        if hasattr(path_or_buf, "write"):
            path_or_buf.write(text)
        else:
            with open(path_or_buf, "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        return None

    def to_frame(self):
        """A pandas DataFrame of the same rows, with the same ``attrs``."""
        import pandas

        frame = pandas.DataFrame(self.rows, columns=list(self.columns))
        frame.attrs.update(self.attrs)
        return frame

    def _display(self):
        """Header and rows of text cells, rounded as the command line's table."""
        header = ["method", *header_cells(self.confidence)]
        return header, [[row["method"], *row_cells(row)] for row in self.rows]

    def __str__(self):
        header, cells = self._display()
        widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
        lines = [header, *cells]
        return "\n".join(
            "  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                      for i, (cell, width) in enumerate(zip(line, widths))).rstrip()
            for line in lines)

    def __repr__(self):
        return str(self)

    def _repr_html_(self):
        header, cells = self._display()
        head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in line)
                       + "</tr>" for line in cells)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
