"""BayesianReranker: the shared machinery of every reranker."""

import copy
from contextlib import contextmanager
from functools import partial
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import rankdata
from sklearn import config_context
from sklearn.base import BaseEstimator, _fit_context, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_array, column_or_1d

from .._core._array_api import device, max_float, namespace, to_namespace, to_numpy
from .._validation import NotBool as Interval
from .._validation import check_group_labels, describe, naming, warn_caller
from ._graph import (
    affinity,
    degrees,
    is_normalized,
    laplacian,
    one_thread,
    pair_laplacian,
    thread_limit,
)
from ._pairs import select_pairs
from ._solvers import (
    TOLERANCE,
    components,
    free_directions,
    last_of_each_component,
    paired_components,
    place_components,
    solve_two_scales,
)


class BayesianReranker(BaseEstimator):
    """Base class of the rerankers; not for direct use.

    A reranker takes one or several lists, each a set of samples with features and
    initial (e.g. text-search) scores, and returns new scores ``r`` that minimise

        E(r) = prior(r) + c * Dist(r, rbar)

    where the prior makes visually similar samples score alike and ``Dist``
    keeps ``r`` faithful to the initial scores ``rbar``. Every energy is normalised
    so that c is dimensionless: the prior ``r^T L r`` is divided by ``tr(L)`` and the
    distance's sum by its number of terms (pairs or samples), both measured in the
    same units of score, so that neither the list's length, the graph's density nor
    the scores' scale changes what a given c means (see each reranker). What the
    energy leaves free is placed by one rule: each connected component keeps the
    mean of its initial scores. Subclasses implement
    ``_solve(weights, initial, features, random_state)`` (``random_state``: the
    list's own, for the clustering pair selection), returning ``(scores, info)`` with
    ``info`` a dict of ``status``, ``n_iter`` and ``objective``.

    ``fit(X, y, groups=None)``: ``X`` holds the features (one row per sample),
    ``y`` the initial scores, ``groups`` which list (query) each sample belongs
    to; every list is reranked independently, in parallel over ``n_jobs``.
    Scores are float64 whatever the input dtype: the solvers work in double
    precision, and rounding to float32 would tie scores that they tell apart.
    Under scikit-learn's ``array_api_dispatch``, torch, CuPy or array-api-strict
    inputs are reranked on the host (the solvers are NumPy and SciPy), and
    ``fit_predict`` and ``scores_`` return an array of their namespace and device.

    Parameters
    ----------
    c : float or "auto", default="auto"
        Weight of the distance against the prior, > 0 and dimensionless; ``"auto"``
        sets it per list, as each reranker describes.
    graph : {"knn", "dense"}, default="knn"
        Gaussian affinities over a symmetrised k-nearest-neighbour graph, or over
        all pairs.
    n_neighbors : int, default=10
        Neighbours per sample for ``graph="knn"``.
    sigma : float or "median", default="median"
        Gaussian kernel width; ``"median"`` is the median edge length.
    initial : {"scores", "minmax", "rank", "binary"}, default="scores"
        The prior ranking, as in :class:`HingeReranker`.
    n_positive : int, default=10
        Pseudo-positives of ``initial="binary"``.
    n_jobs : int, default=None
        Lists reranked in parallel (joblib); None means 1.

    Examples
    --------
    >>> from skqbnorm.rerankers import BayesianReranker, PointwiseReranker
    >>> issubclass(PointwiseReranker, BayesianReranker)
    True
    >>> PointwiseReranker().get_params()["c"]
    'auto'
    """

    _parameter_constraints: dict = {
        "c": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "graph": [StrOptions({"knn", "dense"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither"), StrOptions({"median"})],
        "initial": [StrOptions({"scores", "minmax", "rank", "binary"})],
        "n_positive": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
    }

    # GridSearchCV and cross_validate route ``groups`` to fit when metadata routing
    # is enabled: a fold's lists must stay separate lists.
    __metadata_request__fit = {"groups": True}

    #: ``c="auto"`` gives each list this factor times the c that generalised
    #: cross-validation picks for it (:func:`auto_c`); each reranker sets its own.
    auto_c_scale = 1.0

    #: The parameter :class:`RerankerCV` tunes (through ``rerank_path``), and its
    #: default candidates.
    strength_param = "c"
    strength_grid = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)

    def __init__(self, c="auto", *, graph="knn", n_neighbors=10, sigma="median", initial="scores",
                 n_positive=10, n_jobs=None):
        self.c = c
        self.graph = graph
        self.n_neighbors = n_neighbors
        self.sigma = sigma
        self.initial = initial
        self.n_positive = n_positive
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, groups=None):
        """Rerank every list and keep the scores with solver diagnostics.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples (e.g. visual descriptors of each result).
        y : array-like of shape (n_samples,)
            Initial scores, higher is better (e.g. text-search scores).
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.

        Returns
        -------
        self : object
            Fitted reranker, with ``scores_`` and per-list diagnostics.
        """
        with on_the_host(X, y, groups) as (on_host, to_input):
            X, y, self.group_labels_, lists = split_lists(*on_host)
            (results,) = self._path(X, y, lists, [self.c])
            self._record(results, lists, X.shape)
            self.scores_ = to_input(self.scores_)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def rerank_path(self, X, y, groups=None, *, cs):
        """Rerank every list at every c of ``cs``, each list's graph built once.

        scikit-learn's ``*_path`` habit (``lasso_path``): a sweep over c costs one
        graph per list, not one per c. :class:`RerankerCV` scores such a path.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples.
        y : array-like of shape (n_samples,)
            Initial scores, higher is better.
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.
        cs : array-like of float
            The values of c, each > 0.

        Returns
        -------
        rerankers : list of BayesianReranker
            For each c of ``cs``, in order, a clone of this reranker with that c,
            fitted: its ``scores_`` and diagnostics are those ``fit`` gives at that
            c, and it warns as ``fit`` does.

        Examples
        --------
        >>> import numpy as np
        >>> from skqbnorm.rerankers import PointwiseReranker
        >>> rng = np.random.default_rng(0)
        >>> features, initial = rng.normal(size=(30, 2)), rng.normal(size=30)
        >>> path = PointwiseReranker().rerank_path(features, initial, cs=[0.1, 1.0])
        >>> [reranker.c for reranker in path]
        [0.1, 1.0]
        >>> bool(np.all(path[1].scores_ == PointwiseReranker(c=1.0).fit_predict(features, initial)))
        True
        """
        return fitted_path(self, X, y, groups, checked_cs(cs))

    def _path(self, X, y, lists, cs):
        """For each c of ``cs``, every list's ``(scores, info)``: the lists in parallel."""
        states = self._random_states(len(lists))
        paths = Parallel(n_jobs=self.n_jobs)(
            delayed(self._rerank_path)(X[i], y[i], state, cs) for i, state in zip(lists, states)
        )
        return [[path[k] for path in paths] for k in range(len(cs))]

    def _record(self, results, lists, shape):
        """Keep each list's ``(scores, info)`` as the fitted attributes, and warn."""
        self.scores_ = np.empty(shape[0])
        for index, (scores, _) in zip(lists, results):
            self.scores_[index] = scores
        infos = [info for _, info in results]
        self.solver_status_ = np.array([info["status"] for info in infos])
        self.n_iter_ = np.array([info["n_iter"] for info in infos])
        self.objective_ = np.array([info["objective"] for info in infos])
        self.c_ = np.array([info["c"] for info in infos])
        self.n_features_in_ = shape[1]
        self._warn_of(infos)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_predict(self, X, y, groups=None):
        """Rerank and return the new scores.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the samples.
        y : array-like of shape (n_samples,)
            Initial scores, higher is better.
        groups : array-like of shape (n_samples,), default=None
            The list each sample belongs to; None means one list.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Reranked scores, higher is better, comparable within a list; under
            ``array_api_dispatch``, an array of the namespace and device of the inputs.
        """
        return self.fit(X, y, groups=groups).scores_

    def _warn_of(self, infos):
        """Warn of the lists whose solver stopped short or whose graph has no edge.

        From here, the caller's thread: the lists are reranked by joblib's workers,
        whose own warnings (another process's) would not reach the caller.
        """
        short = {}  # (solver, status) -> the lists it stopped short on
        for i, info in enumerate(infos):
            if info["status"] != "solved":
                short.setdefault((info["solver"], info["status"]), []).append(i)
        for (solver, status), stopped in short.items():
            n_iter = max(infos[i]["n_iter"] for i in stopped)
            warn_caller(
                f"{solver[0].upper()}{solver[1:]} stopped with status {status!r} after {n_iter} "
                f"iterations on {which_lists(self.group_labels_, stopped)}: their scores may be "
                f"inaccurate. {self._convergence_advice(solver)}",
                ConvergenceWarning,
            )
        edgeless = [i for i, info in enumerate(infos) if info["edgeless"]]
        if edgeless:
            warn_caller(
                f"sigma={self.sigma!r} is so small against the distances between the samples "
                f"of {which_lists(self.group_labels_, edgeless)} that every affinity "
                "exp(-d^2 / (2 sigma^2)) underflows to 0: their graph has no edge and the "
                "prior no effect. Use a larger sigma or 'median'.",
                UserWarning,
            )

    def _convergence_advice(self, solver):
        return (f"Conjugate gradients stop at a relative residual of {TOLERANCE} or after "
                "20 iterations per sample.")

    def _random_states(self, n_lists):
        """The ``random_state`` of each list: a RandomState instance is drawn from here,
        one seed per list in the order of the sorted labels, so that the jobs (threads or
        processes, each with its own copy) do not change what each list gets."""
        random_state = getattr(self, "random_state", None)
        if isinstance(random_state, np.random.RandomState):
            return random_state.randint(np.iinfo(np.int32).max, size=n_lists)
        return [random_state] * n_lists

    def _rerank_path(self, features, initial, random_state, cs):
        """One list reranked at every c of ``cs``, its graph built once: ``[(scores, info)]``."""
        with thread_limit(*features.shape):
            weights = affinity(features, graph=self.graph, n_neighbors=self.n_neighbors,
                               sigma=self.sigma, warn=False)
        with one_thread():
            prior_ranking = self._initial_scores(initial)
            if any(isinstance(c, str) for c in cs):  # c="auto": one choice per list
                auto = self._auto_c(weights, prior_ranking)
                cs = [auto if isinstance(c, str) else c for c in cs]
            results = []
            for c in cs:
                at_c = copy.copy(self)
                at_c.c = c
                results.append(at_c._solve(weights, prior_ranking, features, random_state))
        for c, (scores, info) in zip(cs, results):
            info["edgeless"] = len(initial) > 1 and weights.nnz == 0
            info["c"] = float(c)
            if not np.all(np.isfinite(scores)):
                raise ValueError(
                    f"{type(self).__name__} gave non-finite scores for a list of {len(initial)} "
                    f"samples with initial scores y in [{initial.min()}, {initial.max()}]: the "
                    "reranked scores exceed float64's range; rescale y."
                )
        return results

    def _auto_c(self, weights, prior_ranking):
        """The c of ``c="auto"`` for one list: ``auto_c_scale`` times :func:`auto_c`'s
        choice on this reranker's prior."""
        return self.auto_c_scale * auto_c(self._prior(weights, self._normalized()), prior_ranking)

    def _initial_scores(self, scores):
        """The prior ranking ``rbar``, by the ``initial`` strategy."""
        if self.initial == "scores":
            return scores
        if self.initial == "minmax":  # scale first: max - min may exceed float64's range
            scaled = scores / np.abs(scores).max()
            return (scaled - scaled.min()) / np.ptp(scaled)
        # Tied scores must stay tied (their pairs carry no order), whatever the rows' order:
        # a rank is the mean position of its ties, and a sample is among the top
        # n_positive when fewer than n_positive score strictly higher.
        if self.initial == "rank":
            return 1.0 - (rankdata(-scores, method="average") - 1) / len(scores)
        return (rankdata(-scores, method="min") - 1 < self.n_positive).astype(float)

    def _normalized(self):
        """Whether the prior is the normalised Laplacian: never, unless a reranker's
        ``laplacian`` parameter says so."""
        return False

    def _prior(self, weights, normalized=False):
        return laplacian(weights, normalized=normalized)

    @staticmethod
    def _null(weights, normalized):
        """Per-component null vector of the prior: ones, or ``sqrt(d)`` (isolated items: 1)."""
        if not normalized:
            return np.ones(weights.shape[0])
        degree = degrees(weights)
        return np.where(degree > 0, np.sqrt(degree), 1.0)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.non_deterministic = False
        return tags


class ListComponents(NamedTuple):
    """A list's components of the graph joined with the pairs (``label``), which hold
    pairs, which the energy leaves free to move and along which ``direction`` (see
    ``free_directions``), and the prior's null vectors."""

    label: np.ndarray
    has_pair: np.ndarray
    free: np.ndarray
    direction: np.ndarray
    null: np.ndarray


def split_lists(X, y, groups):
    """Validated ``X`` and ``y``, the sorted group labels, and the indices of each
    list (in label order, ascending within a list); each list checked by :func:`check_list`."""
    X, y, groups = checked_inputs(X, y, groups)
    with naming("groups", groups):
        labels, members = np.unique(groups, return_inverse=True)
    order = np.argsort(members, kind="stable")
    lists = np.split(order, np.cumsum(np.bincount(members))[:-1])
    for label, index in zip(labels, lists):
        check_list(label, y[index], len(labels))
    return X, y, labels, lists


def fitted_path(reranker, X, y, groups, values):
    """A fitted clone of ``reranker`` at each of ``values`` of its ``strength_param``,
    every list reranked once for all of them by the reranker's ``_path``."""
    with on_the_host(X, y, groups) as (on_host, to_input):
        X, y, labels, lists = split_lists(*on_host)
        fitted = []
        for value, results in zip(values, reranker._path(X, y, lists, values)):
            at_value = clone(reranker).set_params(**{reranker.strength_param: float(value)})
            at_value.group_labels_ = labels
            fitted.append(at_value._record(results, lists, X.shape))
            at_value.scores_ = to_input(at_value.scores_)
    return fitted


@contextmanager
def on_the_host(*arrays):
    """The inputs of a reranker on the host, and the way back for its scores.

    Under scikit-learn's ``array_api_dispatch`` with an input of another namespace
    than NumPy (torch, CuPy, array-api-strict), yields NumPy copies of ``arrays``
    and a function that puts a NumPy array of scores on the namespace and device of
    the first such input (float64 where the device has it, else float32); the body
    runs with dispatch off, so that it computes exactly as the NumPy path does.
    Otherwise yields ``arrays`` unchanged and the identity.
    """
    xp, given = namespace(*arrays)
    if not given:
        yield arrays, lambda scores: scores
        return
    where = device(next(array for array in arrays if namespace(array)[1]))
    with config_context(array_api_dispatch=False):
        yield tuple(map(to_numpy, arrays)), partial(_to_input, xp, where)


def _to_input(xp, where, scores):
    dtype = np.float64 if max_float(xp, where) == xp.float64 else np.float32
    return to_namespace(np.asarray(scores, dtype=dtype), xp, where)


def checked_cs(cs, name="cs", of="c > 0", positive=True):
    """The values of a path as a float array: a non-empty 1-D sequence of finite real
    numbers (booleans and strings refused, not converted), each > 0 when ``positive``;
    a ValueError names ``name`` and what the values are ``of``."""
    if isinstance(cs, np.ndarray):
        reals = cs.dtype.kind in "iuf"
    else:
        reals = not isinstance(cs, str) and np.iterable(cs) and all(
            isinstance(value, Real) and not isinstance(value, (bool, np.bool_)) for value in cs)
    checked = np.asarray(cs, dtype=float) if reals and np.ndim(cs) == 1 else None
    if checked is None or len(checked) == 0 or not np.all(np.isfinite(checked)) or (
            positive and np.any(checked <= 0)):
        kind = "" if reals else " (real numbers, not booleans or strings)"
        raise ValueError(f"{name} must be a non-empty 1-D sequence of finite values of {of}; "
                         f"got {name}={cs!r}{kind}.")
    return checked


def check_list(label, initial, n_lists):
    """Refuse a list that cannot be reranked: fewer than 2 samples, or constant scores."""
    where = "" if n_lists == 1 else f" in group {np.asarray(label).item()!r}"
    if len(initial) < 2:
        raise ValueError(
            f"A list needs at least 2 samples to rerank; got {len(initial)} sample(s){where} "
            "(rows of X and entries of y per value of groups)."
        )
    if np.ptp(initial) == 0:
        raise ValueError(
            f"The initial scores y are constant (all {initial[0]}){where}, shape "
            f"{initial.shape}: they carry no order to rerank."
        )


def which_lists(labels, indices):
    """The lists at ``indices`` (of those with the group ``labels``), for a message."""
    if len(labels) == 1:
        return "the list"
    names = ", ".join(repr(np.asarray(labels[i]).item()) for i in indices[:5])
    more = ", ..." if len(indices) > 5 else ""
    return f"{len(indices)} of {len(labels)} lists (groups {names}{more})"


def checked_inputs(X, y, groups):
    """Features, initial scores and list labels, validated; errors name X, y or groups."""
    if y is None:
        raise ValueError(
            "The reranker requires y to be passed, but the target y is None: y holds the "
            "initial scores."
        )
    for name, value in (("X", X), ("y", y)):
        # check_array casts them; a torch dtype has no kind (check_array converts it)
        if getattr(getattr(value, "dtype", None), "kind", "") in ("m", "M"):
            raise ValueError(f"{name} must be numeric; got {name} of {describe(value)}.")
    with naming("X", X):
        X = check_array(X, dtype=np.float64, input_name="X")
    with naming("y", y):
        y = column_or_1d(check_array(y, ensure_2d=False, dtype=np.float64, input_name="y"),
                         warn=True).astype(np.float64, copy=False)
    if groups is not None:
        groups = check_group_labels(groups)
    if len(X) != len(y) or (groups is not None and len(groups) != len(y)):
        given = "" if groups is None else f" and groups of shape {groups.shape}"
        raise ValueError(
            f"X, y{' and groups' if given else ''} must have one entry per sample; got X of "
            f"shape {X.shape}{',' if given else ' and'} y of shape {y.shape}{given}."
        )
    if groups is None:
        groups = np.zeros(len(y), dtype=int)
    return X, y, groups


#: The candidates of ``c="auto"``: 1e-4 to 1e3, ten per decade.
AUTO_GRID = 10.0 ** (np.arange(-40, 31) / 10)
#: A longer list chooses its c from this many of its best items by prior ranking.
AUTO_MAX_ITEMS = 1024


def auto_c(prior, target):
    """The c that generalised cross-validation (GCV) gives the point-wise smoother.

    Label-free, from the list's prior ``L`` and its prior ranking ``rbar`` alone: the
    point-wise energy's minimiser ``r = S_c rbar`` with ``S_c = c (L / dbar + c I)^-1``
    (``dbar = tr(L) / N``) is a linear smoother of ``rbar`` over the graph, and GCV
    (Craven and Wahba, 1979) picks the c of ``AUTO_GRID`` that minimises
    ``N ||(I - S_c) rbar||^2 / tr(I - S_c)^2``, its estimate of how well the smoothed
    scores would predict fresh noisy ones: a small c (strong smoothing) where the
    scores differ between neighbours in the graph as independent noise would, so that
    averaging over neighbours removes it, and a large c where they already vary
    smoothly over the graph, with nothing left to remove. Ties go to the larger c. One
    dense eigendecomposition of ``L / dbar``, ``O(N^3)``: a list of more than
    ``AUTO_MAX_ITEMS`` items is judged by its best ``AUTO_MAX_ITEMS`` by ``rbar``
    and the rows and columns of ``L`` between them. A list without edges gets 1.
    """
    if prior.shape[0] > AUTO_MAX_ITEMS:
        best = np.sort(np.argsort(-target, kind="stable")[:AUTO_MAX_ITEMS])
        prior, target = prior[best][:, best], target[best]
    n_items = prior.shape[0]
    trace = float(prior.diagonal().sum())
    if trace <= 0 or n_items < 3:
        return 1.0
    values, vectors = np.linalg.eigh(prior.toarray() * (n_items / trace))
    values = np.clip(values, 0.0, None)
    largest = np.max(np.abs(target))
    if largest == 0:
        return 1.0
    projected = (vectors.T @ (target / largest)) ** 2  # the choice ignores the scores' scale
    shrink = values[None, :] / (values[None, :] + AUTO_GRID[:, None])  # 1 - eigenvalues of S_c
    residual = (shrink**2) @ projected
    freedom = shrink.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(freedom > 0, n_items * residual / freedom**2, np.inf)
    best = np.flatnonzero(score <= score.min() * (1 + 1e-12))
    return float(AUTO_GRID[best[-1]])


def score_scale(values):
    """``(magnitude, mean, std)`` with ``values = magnitude * t`` and ``mean, std`` those of t.

    Dividing by the largest magnitude first keeps every moment finite for scores up
    to float64's limit (1e308): the energies are evaluated on ``t``.
    """
    magnitude = float(np.abs(values).max()) or 1.0
    scaled = values / magnitude
    return magnitude, float(scaled.mean()), float(scaled.std())


def trace_or_one(matrix):
    """``tr(L)``, the prior's natural scale (1 for a graph without edges)."""
    trace = float(matrix.diagonal().sum())
    return trace if trace > 0 else 1.0


class PairwiseReranker(BayesianReranker):
    """Base of the rerankers whose ranking distance runs over pairs of samples."""

    _parameter_constraints: dict = {
        **BayesianReranker._parameter_constraints,
        "laplacian": [StrOptions({"unnormalized", "normalized"})],
        "pairs": [StrOptions({"all", "rho_adjacent", "top_bottom", "clustering"})],
        "rho": [Interval(Integral, 1, None, closed="left")],
        "n_top": [Interval(Integral, 1, None, closed="left")],
        "n_bottom": [Interval(Integral, 1, None, closed="left")],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, c, *, graph, n_neighbors, sigma, laplacian, pairs, rho, n_top, n_bottom,
                 n_clusters, initial, n_positive, random_state, n_jobs):
        super().__init__(c, graph=graph, n_neighbors=n_neighbors, sigma=sigma, initial=initial,
                         n_positive=n_positive, n_jobs=n_jobs)
        self.laplacian = laplacian
        self.pairs = pairs
        self.rho = rho
        self.n_top = n_top
        self.n_bottom = n_bottom
        self.n_clusters = n_clusters
        self.random_state = random_state

    def _pairs(self, features, initial, random_state):
        pairs = select_pairs(
            self.pairs, features, initial, rho=self.rho, n_top=self.n_top, n_bottom=self.n_bottom,
            n_clusters=self.n_clusters, random_state=random_state,
        )
        if len(pairs[0]) == 0:
            strategy = f"initial={self.initial!r}" + (
                f" with n_positive={self.n_positive}" if self.initial == "binary" else ""
            )
            raise ValueError(
                f"pairs={self.pairs!r} selected no strictly ordered pair from {len(initial)} "
                f"initial scores ({strategy}); choose another pair strategy, initial "
                "strategy or more distinct scores."
            )
        return pairs

    def _components(self, weights, prior, pairs):
        """What a list's energy leaves free, found once per list (see ``ListComponents``)."""
        joined = prior + pair_laplacian(pairs, np.ones(len(pairs[0])), prior.shape[0])
        label = components(joined)
        null = self._null(weights, self._normalized())
        free, direction = free_directions(label, pairs, components(prior), null)
        return ListComponents(label, paired_components(label, pairs), free, direction, null)

    def _normalized(self):
        return is_normalized(self.laplacian)

    def _closed_form(self, parts, prior, pairs, strength, pull, kappa, start):
        """Solve ``(L + kappa L_pairs(strength)) r = kappa pull``, the minimiser of the
        prior plus a quadratic pair term, for any kappa (see ``solve_two_scales``);
        ``parts``: the list's ``_components``."""
        # Singular on each component the energy leaves free to move: every one under the
        # plain Laplacian; under the normalised one, those without pairs or regular.
        pair_prior = pair_laplacian(pairs, strength, len(parts.label))
        pinned = last_of_each_component(parts.label) & parts.free[parts.label]
        return solve_two_scales(prior, pair_prior, pull, kappa, null=parts.null, pinned=pinned, start=start)

    @staticmethod
    def _place(scores, initial, parts):
        """Each component at the mean of its initial scores (see ``place_components``)."""
        return place_components(scores, initial, parts.label, parts.has_pair, parts.free, parts.direction)
