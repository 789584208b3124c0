"""Synthetic similarity matrices with planted hubs."""

import numpy as np
from sklearn.utils import check_random_state


def make_hubness_sims(n_queries=1000, n_gallery=200, n_bank=1000, *, hub_spread=0.5,
                      signal=3.0, scale=0.1, random_state=None, dtype=np.float64):
    """Query and querybank similarities to a gallery with planted hubs.

    Every gallery item ``j`` has a spread ``sigma_j`` drawn log-normally; a query's
    similarity to ``j`` is ``scale * (sigma_j * z + signal * [j is correct])`` with
    ``z`` standard normal. Items with a large spread reach the top of many rows
    (hubs), which querybank normalisation can correct.

    Parameters
    ----------
    n_queries, n_gallery, n_bank : int
        Sizes of the query set, the gallery and the querybank.
    hub_spread : float, default=0.5
        Standard deviation of ``log sigma_j``; 0 plants no hubs.
    signal : float, default=3.0
        Boost of the correct item, in units of the typical noise.
    scale : float, default=0.1
        Overall scale of the similarities.
    random_state : int, RandomState instance or None
        Seed.
    dtype : numpy dtype, default=np.float64
        Dtype of both matrices.

    Returns
    -------
    query_sims : ndarray of shape (n_queries, n_gallery)
    query_gt : ndarray of shape (n_queries,)
        The correct gallery index of every query.
    bank_sims : ndarray of shape (n_bank, n_gallery)

    Examples
    --------
    >>> from skqbnorm.datasets import make_hubness_sims
    >>> sims, gt, bank = make_hubness_sims(10, 5, 20, random_state=0)
    >>> sims.shape, gt.shape, bank.shape
    ((10, 5), (10,), (20, 5))
    """
    rng = check_random_state(random_state)
    spread = rng.lognormal(0.0, hub_spread, size=n_gallery)

    def draw(n):
        gt = rng.randint(0, n_gallery, size=n)
        sims = rng.standard_normal((n, n_gallery)) * spread
        sims[np.arange(n), gt] += signal
        return (scale * sims).astype(dtype), gt

    query_sims, query_gt = draw(n_queries)
    bank_sims, _ = draw(n_bank)
    return query_sims, query_gt, bank_sims
