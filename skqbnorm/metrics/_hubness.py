"""Hubness measures over the k-occurrence distribution of a gallery."""

import numpy as np
from scipy.stats import skew
from sklearn.utils import gen_batches

from .._core import rows_per_chunk, top_k_mask
from .._core._array_api import namespace, to_numpy
from .._validation import check_int, check_sims, check_vector
from . import _array_api


def k_occurrence(sims, k=10):
    """How many queries have each gallery item among their top ``k``.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Finite scores, higher is better.
    k : int, default=10
        Neighbourhood size, an integer with 1 <= k <= n_gallery. Among tied scores
        the lowest gallery indices are taken first.

    Returns
    -------
    counts : ndarray of shape (n_gallery,)
        The k-occurrence ``N_k`` of every gallery item; they sum to ``n_queries * k``.
        Under scikit-learn's ``array_api_dispatch``, scores of another namespace
        (torch, CuPy) are counted on their device, into int64 counts of that namespace.

    Examples
    --------
    >>> from skqbnorm.metrics import k_occurrence
    >>> k_occurrence([[0.9, 0.5, 0.1], [0.8, 0.1, 0.7]], k=1)
    array([2, 0, 0])
    """
    xp, on_device = namespace(sims)
    if on_device:
        sims = _array_api.device_sims(xp, sims)
        shape = tuple(sims.shape)
        k = check_int(k, "k", low=1, high=shape[1], where=f" for sims of shape {shape}")
        return _array_api.k_occurrence(xp, sims, k)
    sims = check_sims(sims)
    n_gallery = sims.shape[1]
    k = check_int(k, "k", low=1, high=n_gallery, where=f" for sims of shape {sims.shape}")
    counts = np.zeros(n_gallery, dtype=np.int64)
    step = rows_per_chunk(n_gallery, sims.dtype.itemsize, n_buffers=4)
    for rows in gen_batches(len(sims), step):
        counts += top_k_mask(sims[rows], k).sum(axis=0)
    return counts


def hubness(sims, k=10):
    """Hubness of a gallery under a set of queries.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Finite scores, higher is better.
    k : int, default=10
        Neighbourhood size of the k-occurrence, 1 <= k <= n_gallery.

    Returns
    -------
    measures : dict
        The measures of :func:`hubness_from_counts` over ``k_occurrence(sims, k)``.
        Under scikit-learn's ``array_api_dispatch``, the k-occurrence of scores of
        another namespace is counted on their device, and its measures taken on the
        host (one count per gallery item).

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import hubness
    >>> sims = np.array([[0.9, 0.1, 0.0], [0.8, 0.2, 0.1], [0.7, 0.0, 0.6]])
    >>> round(hubness(sims, k=1)["antihub_occurrence"], 3)
    0.667
    """
    counts = k_occurrence(sims, k)  # on the scores' device under array API dispatch
    return hubness_from_counts(to_numpy(counts), k)


def hubness_from_counts(counts, k):
    """The hubness measures of a k-occurrence vector.

    Parameters
    ----------
    counts : array-like of shape (n_gallery,)
        The k-occurrence ``N_k`` of every gallery item: finite, non-negative whole
        numbers, not all zero.
    k : int
        The neighbourhood size the counts were taken at, ``k >= 1`` (it sets the
        hub threshold ``2k``).

    Returns
    -------
    measures : dict
        ``"skewness"``: skewness of ``N_k`` over all items, zeros included (biased,
        as ``scipy.stats.skew``; 0 when every count is equal);
        ``"antihub_occurrence"``: share of items with ``N_k = 0``;
        ``"hub_occurrence"``: share of all k-occurrences landing on items with
        ``N_k >= 2k``; ``"robin_hood"``: ``0.5 sum |N_k - mean| / sum N_k``;
        ``"gini"``: Gini coefficient of ``N_k``.

    Raises
    ------
    ValueError
        When the counts are not a non-empty 1-D vector of finite non-negative
        whole numbers, or are all zero: without a single occurrence (no query)
        the shares of occurrences, the Robin Hood index and the Gini coefficient
        are undefined.

    Examples
    --------
    >>> from skqbnorm.metrics import hubness_from_counts
    >>> measures = hubness_from_counts([4, 2, 0, 0], k=1)  # 6 queries, top-1 each
    >>> measures["hub_occurrence"], measures["antihub_occurrence"]
    (1.0, 0.5)
    >>> round(measures["gini"], 3)
    0.583
    """
    counts = _check_counts(counts)
    k = check_int(k, "k", low=1)
    hubs = counts >= 2 * k
    # The other measures are scale-free: an exact power-of-two scaling keeps cubes finite.
    counts = np.ldexp(counts, -int(np.frexp(counts.max())[1]))
    total = counts.sum()
    n_items = len(counts)
    gini = (2 * np.arange(1, n_items + 1) - n_items - 1) @ np.sort(counts) / (n_items * total)
    constant = counts.min() == counts.max()
    return {
        "skewness": 0.0 if constant else float(skew(counts)),
        "antihub_occurrence": float(np.mean(counts == 0)),
        "hub_occurrence": float(counts[hubs].sum() / total),
        "robin_hood": float(0.5 * np.abs(counts - counts.mean()).sum() / total),
        "gini": float(gini),
    }


def _check_counts(counts):
    counts = check_vector(counts, "counts")
    bad = np.flatnonzero((counts < 0) | (counts != np.round(counts)))
    if bad.size:
        raise ValueError(
            f"counts must hold non-negative whole numbers (k-occurrences); "
            f"counts[{bad[0]}] is {counts[bad[0]]} (shape {counts.shape})."
        )
    if not counts.any():
        raise ValueError(
            f"counts are all zero (shape {counts.shape}): without any occurrence the "
            "hubness measures are undefined."
        )
    return counts
