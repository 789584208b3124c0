"""Planted hubs: gallery items crafted to become the top-1 result of many queries.

Use these attacks to measure how much of a retrieval service's traffic one who can
add items to its gallery captures, with and without querybank normalisation.

Threat model
------------
The attacker can append items (unit embeddings) to the gallery, and holds its own
sample of queries of the query modality, disjoint from the queries served and from
the defender's querybank. It sees the gallery's embeddings (to beat the real items'
best scores). :func:`centroid_hubs` needs only the sample; :func:`optimized_hubs`
also reads the gallery; :func:`adaptive_hubs` further knows which normaliser the
service runs (its class and parameters) and holds a bank like the defender's (drawn
from the same distribution, not the same rows).

Each attack returns the planted embeddings, shape ``(n_hubs, n_dims)``, unit rows;
:func:`plant` appends them to a gallery and returns their indices there. Every
attack is deterministic given ``random_state``. Similarities are cosine: every
input row is scaled to unit length (a copy; the caller's arrays are not changed).

Examples
--------
>>> import numpy as np
>>> from skqbnorm.attacks import centroid_hubs, plant
>>> rng = np.random.default_rng(0)
>>> gallery, sample = rng.normal(size=(50, 8)), rng.normal(size=(30, 8)) + 1.0
>>> attacked, planted = plant(gallery, centroid_hubs(sample))
>>> attacked.shape, planted
((51, 8), array([50]))
"""

import numpy as np
from sklearn.base import clone
from sklearn.cluster import KMeans

from ._validation import check_embeddings, check_int, check_real
from .normalizers import (
    CSLS,
    DynamicInvertedSoftmax,
    InvertedSoftmax,
    NearestNeighborNormalization,
    QueryBankGate,
)

__all__ = ["adaptive_hubs", "centroid_hubs", "optimized_hubs", "plant"]

#: The normalisers whose bias an adaptive attack models (a gate unwraps to its normaliser).
MODELLED = (InvertedSoftmax, DynamicInvertedSoftmax, CSLS, NearestNeighborNormalization)


def plant(gallery, hubs):
    """Append planted items to a gallery.

    Parameters
    ----------
    gallery : array-like of shape (n_gallery, n_dims)
        The gallery's embeddings.
    hubs : array-like of shape (n_hubs, n_dims)
        The planted embeddings, as an attack returns them.

    Returns
    -------
    attacked : ndarray of shape (n_gallery + n_hubs, n_dims)
        A new array: the gallery's rows, then the hubs'.
    planted : ndarray of shape (n_hubs,)
        The planted items' indices in ``attacked``: ``n_gallery, ..., n_gallery +
        n_hubs - 1``. The real items keep their indices.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.attacks import plant
    >>> attacked, planted = plant(np.eye(3), np.ones((2, 3)) / np.sqrt(3))
    >>> attacked.shape, planted
    ((5, 3), array([3, 4]))
    """
    gallery, hubs = check_embeddings(gallery, "gallery"), check_embeddings(hubs, "hubs")
    if hubs.shape[1] != gallery.shape[1]:
        raise ValueError(
            f"hubs must have the gallery's dimension: hubs has shape {hubs.shape}, gallery "
            f"has shape {gallery.shape}."
        )
    attacked = np.concatenate([gallery, hubs.astype(gallery.dtype, copy=False)])
    return attacked, np.arange(len(gallery), len(attacked))


def centroid_hubs(attacker_queries, n_hubs=1, *, random_state=None):
    """Centroid hubs: the normalised mean of the attacker's sample of queries.

    Threat model: the attacker adds items to the gallery and holds a sample of
    queries, disjoint from the served queries and from the defender's bank; it
    knows nothing of the gallery or the normaliser.

    Parameters
    ----------
    attacker_queries : array-like of shape (n_sample, n_dims)
        The attacker's sample of queries.
    n_hubs : int, default=1
        Planted items, in ``[1, n_sample]``. One is the sample's normalised mean;
        more are the normalised centroids of a k-means of the sample's unit rows.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the k-means (unused for one hub).

    Returns
    -------
    hubs : ndarray of shape (n_hubs, n_dims)
        Unit rows, float64, to append to the gallery (see :func:`plant`).

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.attacks import centroid_hubs
    >>> centroid_hubs([[1.0, 0.0], [0.0, 1.0]])
    array([[0.70710678, 0.70710678]])
    """
    queries = _unit_rows(attacker_queries, "attacker_queries")
    n_hubs = check_int(n_hubs, "n_hubs", low=1, high=len(queries),
                       where=f" (attacker_queries has shape {queries.shape})")
    hubs, _ = _clusters(queries, n_hubs, random_state)
    return hubs


def optimized_hubs(attacker_queries, gallery, n_hubs=1, *, n_iter=100, step=0.05,
                   temperature=0.03, random_state=None):
    """Craft hubs that beat the gallery's best item for the attacker's sample.

    Threat model: as :func:`centroid_hubs`, and the attacker reads the gallery's
    embeddings. Each hub starts at a centroid of its share of the sample (the
    k-means clusters of :func:`centroid_hubs`, one cluster per hub) and climbs, by
    projected gradient ascent on the unit sphere, the mean over its share of
    ``sigmoid((s(q, h) - max_g s(q, g)) / temperature)``: a smooth count of the
    queries whose top-1 it takes.

    Parameters
    ----------
    attacker_queries : array-like of shape (n_sample, n_dims)
        The attacker's sample of queries.
    gallery : array-like of shape (n_gallery, n_dims)
        The gallery's embeddings, before the attack.
    n_hubs : int, default=1
        Planted items, in ``[1, n_sample]``.
    n_iter : int, default=100
        Gradient steps, ``>= 0`` (0 returns the centroid hubs).
    step : float, default=0.05
        The angle, in radians, of each step along the normalised gradient, ``> 0``.
    temperature : float, default=0.03
        Scale of the sigmoid, in similarity units, ``> 0``: smaller counts more
        sharply, larger reaches queries further from being taken.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the k-means that shares the sample between hubs.

    Returns
    -------
    hubs : ndarray of shape (n_hubs, n_dims)
        Unit rows, float64; each is the best iterate of its hub by its objective.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.attacks import centroid_hubs, optimized_hubs
    >>> rng = np.random.default_rng(0)
    >>> gallery, sample = rng.normal(size=(200, 16)), rng.normal(size=(100, 16))
    >>> unit = sample / np.linalg.norm(sample, axis=1, keepdims=True)
    >>> g = gallery / np.linalg.norm(gallery, axis=1, keepdims=True)
    >>> def taken(hub):  # share of the sample whose top-1 the hub takes
    ...     return np.mean(unit @ hub[0] > (unit @ g.T).max(axis=1))
    >>> bool(taken(optimized_hubs(sample, gallery)) >= taken(centroid_hubs(sample)))
    True
    """
    queries = _unit_rows(attacker_queries, "attacker_queries")
    gallery = _unit_rows(gallery, "gallery", queries.shape[1])
    n_hubs, n_iter, step, temperature = _check_ascent(queries, n_hubs, n_iter, step,
                                                      temperature)
    margins = (queries @ gallery.T).max(axis=1)
    return _ascend(queries, margins, _RawBias(), n_hubs, n_iter, step, temperature,
                   random_state)


def adaptive_hubs(attacker_queries, gallery, normalizer, bank, n_hubs=1, *, n_iter=100,
                  step=0.05, temperature=0.03, random_state=None):
    """Craft hubs against a querybank normaliser that the attacker knows.

    Threat model: as :func:`optimized_hubs`, and the attacker knows the service's
    normaliser (its class and parameters) and holds ``bank``, a querybank like the
    defender's (same distribution, its own rows). A bias-form normaliser ranks a
    query's row as ``s(q, g) - bias(g)``, where ``bias(g)`` grows with how close
    the bank's queries come to ``g``: the attack fits ``normalizer`` on ``bank``
    to get the real items' biases, and climbs, as :func:`optimized_hubs` does, the
    mean of ``sigmoid((s(q, h) - bias(h) - max_g (s(q, g) - bias(g))) /
    temperature)``, with the hub's own bias and its gradient in closed form:

    - Inverted Softmax, Dynamic Inverted Softmax: ``bias(h) = logsumexp_b(beta
      s(b, h)) / beta - c_mean``; the dynamic one is modelled as if the hub's gate
      were open (its bias is then the Inverted Softmax's);
    - CSLS: ``bias(h) = r_k(h) / 2``, NNN: ``alpha r_k(h)``, with ``r_k(h)`` the
      mean of the ``k`` largest ``s(b, h)`` over the bank;
    - a :class:`~skqbnorm.normalizers.QueryBankGate` is attacked through the
      normaliser it wraps.

    Parameters
    ----------
    attacker_queries : array-like of shape (n_sample, n_dims)
        The attacker's sample of queries.
    gallery : array-like of shape (n_gallery, n_dims)
        The gallery's embeddings, before the attack.
    normalizer : estimator
        An InvertedSoftmax, DynamicInvertedSoftmax, CSLS or
        NearestNeighborNormalization with ``metric="cosine"`` (or a QueryBankGate of
        one), fitted or not: a clone is fitted on ``bank``.
    bank : array-like of shape (n_bank, n_dims)
        The attacker's querybank embeddings.
    n_hubs : int, default=1
        Planted items, in ``[1, n_sample]``.
    n_iter : int, default=100
        Gradient steps, ``>= 0``.
    step : float, default=0.05
        The angle, in radians, of each step, ``> 0``.
    temperature : float, default=0.03
        Scale of the sigmoid, in similarity units, ``> 0``.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the k-means that shares the sample between hubs.

    Returns
    -------
    hubs : ndarray of shape (n_hubs, n_dims)
        Unit rows, float64.

    Raises
    ------
    ValueError
        For a normaliser whose scores are not modelled (another class, another
        metric), naming it.

    Examples
    --------
    >>> import numpy as np
    >>> from skqbnorm.attacks import adaptive_hubs
    >>> from skqbnorm.normalizers import CSLS
    >>> rng = np.random.default_rng(0)
    >>> gallery, sample, bank = (rng.normal(size=(n, 16)) for n in (200, 100, 300))
    >>> hubs = adaptive_hubs(sample, gallery, CSLS(k=10), bank, n_hubs=2, random_state=0)
    >>> hubs.shape, np.allclose(np.linalg.norm(hubs, axis=1), 1.0)
    ((2, 16), True)
    """
    queries = _unit_rows(attacker_queries, "attacker_queries")
    gallery = _unit_rows(gallery, "gallery", queries.shape[1])
    bank = _unit_rows(bank, "bank", queries.shape[1])
    model = _bias_model(normalizer)
    n_hubs, n_iter, step, temperature = _check_ascent(queries, n_hubs, n_iter, step,
                                                      temperature)
    fitted = clone(model).fit(bank, gallery=gallery)
    real = (queries @ gallery.T - fitted.gallery_bias()).max(axis=1)
    return _ascend(queries, real, _HubBias.of(fitted, bank), n_hubs, n_iter, step,
                   temperature, random_state)


# -- the hub's bias under each normaliser ---------------------------------------------


class _RawBias:
    """No normaliser: the hub's bias is 0."""

    def __call__(self, hubs):
        return np.zeros(len(hubs)), np.zeros_like(hubs)


class _HubBias:
    """A hub's bias ``bias(h)`` under a fitted normaliser, and its gradient in ``h``."""

    def __init__(self, bank, kind, beta=None, k=None, scale=1.0, offset=0.0):
        self.bank, self.kind, self.beta, self.k = bank, kind, beta, k
        self.scale, self.offset = scale, offset

    @classmethod
    def of(cls, fitted, bank):
        if isinstance(fitted, InvertedSoftmax):
            return cls(bank, "softmax", beta=float(fitted.beta), offset=fitted.mean_soft_max_)
        alpha = 0.5 if isinstance(fitted, CSLS) else float(fitted.alpha)
        return cls(bank, "top_k", k=int(fitted.k), scale=alpha)

    def __call__(self, hubs):
        """``(bias, gradient)``: shapes (n_hubs,) and (n_hubs, n_dims)."""
        sims = self.bank @ hubs.T  # (n_bank, n_hubs)
        if self.kind == "softmax":
            scaled = self.beta * sims
            peak = scaled.max(axis=0)
            weights = np.exp(scaled - peak)
            total = weights.sum(axis=0)
            bias = (peak + np.log(total)) / self.beta - self.offset
            gradient = (weights / total).T @ self.bank
        else:
            top = np.argpartition(-sims, self.k - 1, axis=0)[: self.k]  # (k, n_hubs)
            bias = self.scale * np.take_along_axis(sims, top, axis=0).mean(axis=0)
            gradient = self.scale * self.bank[top].mean(axis=0)
        return bias, gradient


def _bias_model(normalizer):
    """The normaliser whose bias the attack models, or a ValueError naming it."""
    inner = normalizer
    if isinstance(normalizer, QueryBankGate):  # a gate of None wraps the DIS at its defaults
        inner = normalizer.normalizer or DynamicInvertedSoftmax()
    if not isinstance(inner, MODELLED) or getattr(inner, "metric", None) != "cosine":
        raise ValueError(
            f"normalizer={normalizer!r} is not modelled by adaptive_hubs: it models "
            "InvertedSoftmax, DynamicInvertedSoftmax, CSLS and NearestNeighborNormalization "
            "with metric='cosine' (or a QueryBankGate of one)."
        )
    return inner


# -- the ascent -----------------------------------------------------------------------


def _objective(hubs, queries, labels, margins, hub_bias, temperature):
    """Each hub's objective and its gradient in the hub's (unconstrained) embedding.

    Hub ``j``'s objective is the sum over its queries ``q`` (``labels == j``),
    divided by the sample's size, of ``sigmoid((q . h_j - bias(h_j) - margins[q]) /
    temperature)``. Returns ``(values, gradients)``, shapes (n_hubs,) and
    (n_hubs, n_dims).
    """
    bias, bias_gradient = hub_bias(hubs)
    z = (np.einsum("ij,ij->i", queries, hubs[labels]) - bias[labels] - margins) / temperature
    taken = 0.5 * (1.0 + np.tanh(z / 2))  # the sigmoid, without overflow
    n_hubs, n_sample = len(hubs), len(queries)
    values = np.bincount(labels, weights=taken, minlength=n_hubs) / n_sample
    slope = taken * (1.0 - taken) / (temperature * n_sample)
    weight = np.bincount(labels, weights=slope, minlength=n_hubs)
    pull = np.zeros_like(hubs)
    np.add.at(pull, labels, slope[:, None] * queries)
    return values, pull - weight[:, None] * bias_gradient


def _ascend(queries, margins, hub_bias, n_hubs, n_iter, step, temperature, random_state):
    """Projected, normalised gradient ascent of every hub from its cluster's centroid."""
    hubs, labels = _clusters(queries, n_hubs, random_state)
    best, best_values = hubs.copy(), np.full(n_hubs, -np.inf)
    for _ in range(n_iter + 1):
        values, gradient = _objective(hubs, queries, labels, margins, hub_bias, temperature)
        better = values > best_values
        best[better], best_values[better] = hubs[better], values[better]
        tangent = gradient - np.einsum("ij,ij->i", gradient, hubs)[:, None] * hubs
        length = np.linalg.norm(tangent, axis=1, keepdims=True)
        direction = np.divide(tangent, length, out=np.zeros_like(tangent), where=length > 0)
        hubs = hubs * np.cos(step) + direction * np.sin(step)  # a geodesic step
        hubs /= np.linalg.norm(hubs, axis=1, keepdims=True)
    return best


def _clusters(queries, n_hubs, random_state):
    """``(centroids, labels)``: the sample's normalised mean, or a k-means of it."""
    if n_hubs == 1:
        mean = queries.mean(axis=0)
        return _normalised(mean[None, :]), np.zeros(len(queries), dtype=np.intp)
    seed = int(np.random.default_rng(random_state).integers(2**31 - 1))
    centres = KMeans(n_hubs, n_init=1, random_state=seed).fit(queries).cluster_centers_
    hubs = _normalised(centres)
    return hubs, np.argmax(queries @ hubs.T, axis=1)


def _normalised(rows):
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if not np.all(norms > 0):
        raise ValueError("a hub's mean of queries is the zero vector: it has no direction.")
    return rows / norms


def _unit_rows(X, name, n_dims=None):
    X = check_embeddings(X, name, dtype=np.float64)
    if n_dims is not None and X.shape[1] != n_dims:
        raise ValueError(
            f"{name} must have the attacker_queries' dimension {n_dims}; got shape {X.shape}."
        )
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if not np.all(norms > 0):
        raise ValueError(f"{name} has a zero row (row {int(np.argmin(norms))}): it has no "
                         f"direction under cosine (shape {X.shape}).")
    return X / norms


def _check_ascent(queries, n_hubs, n_iter, step, temperature):
    n_hubs = check_int(n_hubs, "n_hubs", low=1, high=len(queries),
                       where=f" (attacker_queries has shape {queries.shape})")
    n_iter = check_int(n_iter, "n_iter", low=0)
    step, temperature = check_real(step, "step"), check_real(temperature, "temperature")
    for name, value in (("step", step), ("temperature", temperature)):
        if value <= 0:
            raise ValueError(f"{name} must be > 0; got {name}={value}.")
    return n_hubs, n_iter, step, temperature
