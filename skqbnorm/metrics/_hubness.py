"""Hubness measures over the k-occurrence distribution of a gallery."""

import numpy as np
from scipy.stats import skew
from sklearn.utils import gen_batches
from sklearn.utils.validation import check_array

from .._stats import rows_per_chunk, top_k_mask


def k_occurrence(sims, k=10):
    """How many queries have each gallery item among their top ``k``.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Scores, higher is better.
    k : int, default=10
        Neighbourhood size, 1 <= k <= n_gallery. Among tied scores the lowest
        gallery indices are taken first.

    Returns
    -------
    counts : ndarray of shape (n_gallery,)
        The k-occurrence ``N_k`` of every gallery item.

    Examples
    --------
    >>> from skqbnorm.metrics import k_occurrence
    >>> k_occurrence([[0.9, 0.5, 0.1], [0.8, 0.1, 0.7]], k=1)
    array([2, 0, 0])
    """
    sims = check_array(sims, dtype=(np.float64, np.float32), input_name="sims")
    n_gallery = sims.shape[1]
    if not 1 <= k <= n_gallery:
        raise ValueError(f"k must be in [1, {n_gallery}] for sims of shape {sims.shape}; got k={k}.")
    counts = np.zeros(n_gallery, dtype=np.int64)
    for rows in gen_batches(len(sims), rows_per_chunk(n_gallery, sims.dtype.itemsize, n_buffers=4)):
        counts += top_k_mask(sims[rows], k).sum(axis=0)
    return counts


def hubness(sims, k=10):
    """Hubness of a gallery under a set of queries.

    Parameters
    ----------
    sims : array-like of shape (n_queries, n_gallery)
        Scores, higher is better.
    k : int, default=10
        Neighbourhood size of the k-occurrence.

    Returns
    -------
    measures : dict
        ``"skewness"``: skewness of ``N_k`` over all items, zeros included (biased,
        as ``scipy.stats.skew``); ``"antihub_occurrence"``: share of items with
        ``N_k = 0``; ``"hub_occurrence"``: share of all k-occurrences landing on
        items with ``N_k >= 2k``; ``"robin_hood"``: ``0.5 sum |N_k - mean| / sum N_k``;
        ``"gini"``: Gini coefficient of ``N_k``.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.metrics import hubness
    >>> sims = np.array([[0.9, 0.1, 0.0], [0.8, 0.2, 0.1], [0.7, 0.0, 0.6]])
    >>> round(hubness(sims, k=1)["antihub_occurrence"], 3)
    0.667
    """
    counts = k_occurrence(sims, k)
    return hubness_from_counts(counts, k)


def hubness_from_counts(counts, k):
    """The measures of :func:`hubness`, from a k-occurrence vector."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    sorted_counts = np.sort(counts)
    n = len(counts)
    gini = (2 * np.arange(1, n + 1) - n - 1) @ sorted_counts / (n * total)
    return {
        "skewness": float(skew(counts)) if counts.std() > 0 else 0.0,
        "antihub_occurrence": float(np.mean(counts == 0)),
        "hub_occurrence": float(counts[counts >= 2 * k].sum() / total),
        "robin_hood": float(0.5 * np.abs(counts - counts.mean()).sum() / total),
        "gini": float(gini),
    }
