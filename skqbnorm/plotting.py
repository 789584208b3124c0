"""Plotting helpers for the notebooks (matplotlib: ``pip install skqbnorm[plot]``)."""

import numpy as np


def _axes(ax):
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("skqbnorm.plotting needs matplotlib: pip install 'skqbnorm[plot]'") from error
    return plt.gca() if ax is None else ax


def plot_k_occurrence(counts, k=10, ax=None):
    """Draw histograms of k-occurrence, one per labelled setting (e.g. before and after).

    Parameters
    ----------
    counts : dict of str to array-like of shape (n_gallery,)
        The k-occurrence ``N_k`` of every gallery item, per setting.
    k : int, default=10
        The k the counts were taken with (for the axis label).
    ax : matplotlib Axes, default=None
        Where to draw; the current axes by default.

    Returns
    -------
    ax : matplotlib Axes
        The axes drawn on, log-scaled in y.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from skqbnorm.plotting import plot_k_occurrence
    >>> fig, ax = plt.subplots()
    >>> ax = plot_k_occurrence({"raw": [0, 0, 3, 7], "IS": [2, 3, 2, 3]}, k=5, ax=ax)
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['raw (antihubs 50%, max 7)', 'IS (antihubs 0%, max 3)']
    >>> plt.close(fig)
    """
    ax = _axes(ax)
    largest = max(int(np.max(c)) for c in counts.values())
    bins = np.arange(0, largest + 2) - 0.5
    for label, values in counts.items():
        values = np.asarray(values)
        antihubs = np.mean(values == 0)
        ax.hist(values, bins=bins, histtype="step", linewidth=1.5,
                label=f"{label} (antihubs {antihubs:.0%}, max {values.max()})")
    ax.set_yscale("log")
    ax.set_xlabel(f"k-occurrence N_{k} (queries with the item in their top {k})")
    ax.set_ylabel("gallery items")
    ax.legend()
    return ax


def plot_curves(x, curves, *, xlabel, ylabel, logx=False, intervals=None, ax=None):
    """Draw one line per labelled curve over a shared x.

    For instance a change in R@1 against bank size, with its intervals.

    Parameters
    ----------
    x : array-like of shape (n_points,)
        The shared x values.
    curves : dict of str to array-like of shape (n_points,)
        The y values of each curve, by label.
    xlabel, ylabel : str
        The axis labels.
    logx : bool, default=False
        Logarithmic x axis.
    intervals : dict of str to array-like of shape (2, n_points), default=None
        Per curve (any subset), the low and high ends of each point's interval,
        drawn as a whisker from one to the other.
    ax : matplotlib Axes, default=None
        Where to draw; the current axes by default.

    Returns
    -------
    ax : matplotlib Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from skqbnorm.plotting import plot_curves
    >>> fig, ax = plt.subplots()
    >>> ax = plot_curves([100, 1000], {"IS": [1.2, 2.5]}, xlabel="bank size",
    ...                  ylabel="R@1 change", logx=True,
    ...                  intervals={"IS": [[0.5, 1.9], [1.9, 3.1]]}, ax=ax)
    >>> ax.get_xscale(), ax.get_ylabel()
    ('log', 'R@1 change')
    >>> plt.close(fig)
    """
    ax = _axes(ax)
    intervals = {} if intervals is None else intervals
    unknown = set(intervals) - set(curves)
    if unknown:
        raise ValueError(f"intervals names curves that are not drawn: {sorted(unknown)}; "
                         f"the curves are {list(curves)}.")
    for label, values in curves.items():
        line = ax.plot(x, values, marker="o", label=label)[0]
        if label in intervals:
            bounds = np.asarray(intervals[label], dtype=float)
            if bounds.shape != (2, len(x)):
                raise ValueError(
                    f"intervals[{label!r}] must hold the low and the high ends, shape "
                    f"(2, {len(x)}) for {len(x)} points; got shape {bounds.shape} (pass "
                    "per-point pairs transposed)."
                )
            ax.vlines(x, bounds[0], bounds[1], color=line.get_color(), alpha=0.7)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_bars(values, *, ylabel, baseline=None, ax=None):
    """Draw bars of one metric per labelled method, with an optional baseline line.

    Parameters
    ----------
    values : dict of str to float
        The metric of each method, by label, drawn in this order.
    ylabel : str
        The y axis label.
    baseline : float, default=None
        Drawn as a dashed horizontal line (e.g. the initial ranking's MAP).
    ax : matplotlib Axes, default=None
        Where to draw; the current axes by default.

    Returns
    -------
    ax : matplotlib Axes
        The axes drawn on.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from skqbnorm.plotting import plot_bars
    >>> fig, ax = plt.subplots()
    >>> ax = plot_bars({"initial": 0.61, "reranked": 0.66}, ylabel="MAP",
    ...                baseline=0.61, ax=ax)
    >>> [tick.get_text() for tick in ax.get_xticklabels()]
    ['initial', 'reranked']
    >>> plt.close(fig)
    """
    ax = _axes(ax)
    labels = list(values)
    ax.bar(range(len(labels)), [values[label] for label in labels])
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    if baseline is not None:
        ax.axhline(baseline, linestyle="--", color="black", label="baseline")
        ax.legend()
    ax.set_ylabel(ylabel)
    return ax


def plot_changes(changes, metric="R@1", *, ax=None):
    """Draw each method's change with its interval: a dot and a whisker, and a line at zero.

    Parameters
    ----------
    changes : dict
        Per method label, a :class:`~skqbnorm.metrics.PairedComparison` (its
        ``metric``), a :class:`~skqbnorm.metrics.PairedMeanChange` or a tuple
        ``(change, low, high)`` (``low`` and ``high`` None
        without an interval: a hollow dot); or, per bank, such a dict of methods:
        each bank is a series of its own colour, offset a little within each
        method's row.
    metric : str, default="R@1"
        The metric of the comparisons to draw.
    ax : matplotlib Axes, default=None
        Where to draw; the current axes by default.

    Returns
    -------
    ax : matplotlib Axes
        Methods run down the y axis in the order first given, changes along x.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from skqbnorm.plotting import plot_changes
    >>> fig, ax = plt.subplots()
    >>> ax = plot_changes({"IS": (2.1, 0.4, 3.8), "CSLS": (-0.2, None, None)}, ax=ax)
    >>> [tick.get_text() for tick in ax.get_yticklabels()]
    ['IS', 'CSLS']
    >>> plt.close(fig)
    """
    ax = _axes(ax)
    values = next(iter(changes.values()), None)
    banks = changes if isinstance(values, dict) else {None: changes}
    methods = list(dict.fromkeys(method for series in banks.values() for method in series))
    height = 0.6 / len(banks)
    for number, (bank, series) in enumerate(banks.items()):
        offset = (number - (len(banks) - 1) / 2) * height
        rows = np.array([methods.index(method) + offset for method in series])
        centres, lows, highs = np.array([_change(value, metric) for value in series.values()],
                                        dtype=float).T.reshape(3, -1)
        ranged = ~np.isnan(lows)
        # The interval from low to high wherever the change lies (a change of medians
        # may fall outside its percentile interval); a hollow dot where there is none.
        dots = ax.plot(centres[ranged], rows[ranged], "o", label=bank if ranged.any() else None)[0]
        color = dots.get_color()
        ax.hlines(rows[ranged], lows[ranged], highs[ranged], color=color)
        ax.plot(np.r_[lows[ranged], highs[ranged]], np.r_[rows[ranged], rows[ranged]], "|",
                color=color, markersize=8)
        ax.plot(centres[~ranged], rows[~ranged], "o", color=color, markerfacecolor="white",
                label=None if ranged.any() else bank)
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(methods)), methods)
    ax.invert_yaxis()
    ax.set_xlabel(f"change in {metric}")
    if len(banks) > 1:
        ax.legend()
    return ax


def _change(value, metric):
    """``(change, low, high)`` of a comparison (a PairedComparison's ``metric``, or a
    PairedMeanChange) or a tuple; NaN bounds without an interval."""
    if hasattr(value, "change") and not isinstance(value.change, dict):  # PairedMeanChange
        value = value.change, value.low, value.high
    elif hasattr(value, "change"):
        low, high = value.interval[metric] if value.interval else (None, None)
        value = value.change[metric], low, high
    change, low, high = value
    return change, np.nan if low is None else low, np.nan if high is None else high
