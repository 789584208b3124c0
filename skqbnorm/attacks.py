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
from the same distribution, not the same rows). It attacks the normalisers whose
class declares, in its :class:`~skqbnorm.normalizers.Capabilities` (``item_bias``),
how a new item's bias follows from the bank: of those skqbnorm ships, the Inverted
Softmax, the Dynamic Inverted Softmax, CSLS and NNN, each also behind a
:class:`~skqbnorm.normalizers.QueryBankGate`; it refuses the others, naming them.

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

__all__ = ["adaptive_hubs", "centroid_hubs", "optimized_hubs", "plant"]


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
    temperature)``, with the hub's own bias and its gradient in closed form. The
    normaliser's class declares that form in its capabilities
    (:class:`~skqbnorm.normalizers.Capabilities`, ``item_bias``), so any class
    that declares one is attacked, a plug-in of yours as well:

    - ``"log_sum_exp"``: ``bias(h) = logsumexp_b(beta s(b, h)) / beta - c``
      (Inverted Softmax, ``c = c_mean``; the Dynamic Inverted Softmax, modelled as
      if the hub's gate were open, its bias then the Inverted Softmax's);
    - ``"top_k_mean"``: ``bias(h) = scale r_k(h)``, with ``r_k(h)`` the mean of
      the ``k`` largest ``s(b, h)`` over the bank (CSLS: ``scale = 1/2``; NNN:
      ``scale = alpha``);
    - a :class:`~skqbnorm.normalizers.QueryBankGate` is attacked through the
      normaliser it wraps.

    Parameters
    ----------
    attacker_queries : array-like of shape (n_sample, n_dims)
        The attacker's sample of queries.
    gallery : array-like of shape (n_gallery, n_dims)
        The gallery's embeddings, before the attack.
    normalizer : estimator
        A querybank normaliser whose capabilities declare an ``item_bias`` (of the
        catalogue's: InvertedSoftmax, DynamicInvertedSoftmax, CSLS,
        NearestNeighborNormalization), with ``metric="cosine"``, or a QueryBankGate
        of one; fitted or not: a clone is fitted on ``bank``.
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
        For a normaliser whose scores are not modelled (its capabilities declare no
        ``item_bias``, or its metric is not cosine), naming it.

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
    return _ascend(queries, real, _item_bias(fitted, bank), n_hubs, n_iter, step,
                   temperature, random_state)


# -- the hub's bias under each normaliser ---------------------------------------------


class _RawBias:
    """No normaliser: the hub's bias is 0."""

    def __call__(self, hubs):
        return np.zeros(len(hubs)), np.zeros_like(hubs)


class _LogSumExpBias:
    """``bias(h) = logsumexp_b(beta s(b, h)) / beta - offset`` and its gradient in ``h``."""

    def __init__(self, bank, beta, offset):
        self.bank, self.beta, self.offset = bank, beta, offset

    def __call__(self, hubs):
        """``(bias, gradient)``: shapes (n_hubs,) and (n_hubs, n_dims)."""
        scaled = self.beta * (self.bank @ hubs.T)  # (n_bank, n_hubs)
        peak = scaled.max(axis=0)
        weights = np.exp(scaled - peak)
        total = weights.sum(axis=0)
        bias = (peak + np.log(total)) / self.beta - self.offset
        return bias, (weights / total).T @ self.bank


class _TopKMeanBias:
    """``bias(h) = scale * (mean of the k largest s(b, h))`` and its gradient in ``h``."""

    def __init__(self, bank, k, scale):
        self.bank, self.k, self.scale = bank, k, scale

    def __call__(self, hubs):
        """``(bias, gradient)``: shapes (n_hubs,) and (n_hubs, n_dims)."""
        sims = self.bank @ hubs.T  # (n_bank, n_hubs)
        top = np.argpartition(-sims, self.k - 1, axis=0)[: self.k]  # (k, n_hubs)
        bias = self.scale * np.take_along_axis(sims, top, axis=0).mean(axis=0)
        return bias, self.scale * self.bank[top].mean(axis=0)


#: The hub's bias model of each form a normaliser's capabilities may declare.
_ITEM_BIAS_MODELS = {"log_sum_exp": _LogSumExpBias, "top_k_mean": _TopKMeanBias}


def _item_bias(fitted, bank):
    """The bias model of a fitted normaliser: its declared form, with the parameters it
    gives (``_item_bias_parameters``)."""
    form = type(fitted).capabilities.item_bias
    return _ITEM_BIAS_MODELS[form](bank, **fitted._item_bias_parameters())


def _bias_model(normalizer):
    """The normaliser whose bias the attack models (the one a wrapper, such as a gate,
    declares it serves with), or a ValueError naming it."""
    if isinstance(normalizer, type):
        raise ValueError(  # noqa: TRY004 - a bad parameter value, as scikit-learn refuses them
            f"normalizer must be an instance, such as CSLS(); got the class "
            f"normalizer={normalizer.__name__}.")
    wrapped = getattr(normalizer, "_wrapped_normalizer", None)
    inner = normalizer if wrapped is None else wrapped()
    capabilities = getattr(type(inner), "capabilities", None)
    if getattr(capabilities, "item_bias", None) is None:
        declared = ("declare no item_bias" if capabilities is not None
                    else "are not declared (it is no querybank normaliser)")
        raise ValueError(
            f"normalizer={normalizer!r} is not modelled by adaptive_hubs: the capabilities "
            f"of {type(inner).__name__} {declared}. It models the classes that declare how "
            f"a new item's bias follows from the bank, item_bias in {tuple(_ITEM_BIAS_MODELS)}."
        )
    metric = inner.get_params().get("metric")
    if metric != "cosine":
        raise ValueError(
            f"normalizer={normalizer!r} is not modelled by adaptive_hubs: its item_bias "
            f"model holds for metric='cosine'; got metric={metric!r}."
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
