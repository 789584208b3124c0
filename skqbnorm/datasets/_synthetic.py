"""Synthetic similarity matrices with planted hubs."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import validate_params

from .._validation import NotBool, check_float_dtype


@validate_params(
    {
        "n_queries": [NotBool(Integral, 0, None, closed="left")],
        "n_gallery": [NotBool(Integral, 1, None, closed="left")],
        "n_bank": [NotBool(Integral, 0, None, closed="left")],
        "hub_spread": [NotBool(Real, 0, None, closed="left")],
        "signal": [NotBool(Real, None, None, closed="neither")],
        "scale": [NotBool(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "dtype": "no_validation",
    },
    prefer_skip_nested_validation=True,
)
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
        Sizes of the query set, the gallery (>= 1) and the querybank; either set
        may be empty (0) when only the other is needed.
    hub_spread : float, default=0.5
        Standard deviation of ``log sigma_j``, >= 0; 0 plants no hubs.
    signal : float, default=3.0
        Boost of the correct item, in units of the typical noise.
    scale : float, default=0.1
        Overall scale of the similarities, > 0.
    random_state : int, RandomState instance or None
        Seed.
    dtype : float dtype, default=np.float64
        Dtype of both matrices.

    Returns
    -------
    query_sims : ndarray of shape (n_queries, n_gallery)
        Similarities of the queries to the gallery.
    query_gt : ndarray of shape (n_queries,)
        The correct gallery index of every query.
    bank_sims : ndarray of shape (n_bank, n_gallery)
        Similarities of the querybank to the gallery.

    Examples
    --------
    >>> from skqbnorm.datasets import make_hubness_sims
    >>> sims, gt, bank = make_hubness_sims(10, 5, 20, random_state=0)
    >>> sims.shape, gt.shape, bank.shape
    ((10, 5), (10,), (20, 5))
    """
    dtype = check_float_dtype(dtype)
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
