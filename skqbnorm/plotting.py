"""Plotting helpers for the notebooks (matplotlib: ``pip install skqbnorm[plot]``)."""

import numpy as np


def _axes(ax):
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("skqbnorm.plotting needs matplotlib: pip install 'skqbnorm[plot]'") from error
    return plt.gca() if ax is None else ax


def plot_k_occurrence(counts, k=10, ax=None):
    """Histograms of k-occurrence, one per labelled setting (e.g. before and after).

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


def plot_curves(x, curves, *, xlabel, ylabel, logx=False, ax=None):
    """One line per labelled curve over a shared x, e.g. R@1 against bank size.

    Parameters
    ----------
    x : array-like of shape (n_points,)
    curves : dict of str to array-like of shape (n_points,)
    xlabel, ylabel : str
    logx : bool, default=False
        Logarithmic x axis.
    ax : matplotlib Axes, default=None

    Returns
    -------
    ax : matplotlib Axes
    """
    ax = _axes(ax)
    for label, values in curves.items():
        ax.plot(x, values, marker="o", label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_bars(values, *, ylabel, baseline=None, ax=None):
    """Bars of one metric per labelled method, with an optional baseline line.

    Parameters
    ----------
    values : dict of str to float
    ylabel : str
    baseline : float, default=None
        Drawn as a dashed horizontal line (e.g. the initial ranking's MAP).
    ax : matplotlib Axes, default=None

    Returns
    -------
    ax : matplotlib Axes
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
