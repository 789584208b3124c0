"""The sparse symmetric solves shared by the closed-form rerankers, and component placement."""


import warnings

import numpy as np
from scipy import sparse
from scipy.linalg import LinAlgWarning, lu_factor, lu_solve
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import cg, splu

from ._graph import pair_laplacian

#: Relative residual at which conjugate gradients stop.
TOLERANCE = 1e-10
#: A conjugate-gradient iteration's fixed cost beyond its arithmetic (scipy's Python
#: loop), in equivalent floating-point operations.
ITERATION_OVERHEAD = 50_000
#: Conjugate gradients are not tried when a factorisation costs less than this many
#: of their iterations: the rerankers' Jacobi-preconditioned systems need tens of them
#: to reach ``TOLERANCE`` at their defaults, more at small c, and a stop short of it
#: pays for both solves.
FEWEST_ITERATIONS = 50
#: A dense LU (LAPACK's, blocked) in the units above: its ``2 n^3 / 3`` operations run
#: faster than a conjugate-gradient iteration's, by ``DENSE_SPEEDUP``, plus a fixed
#: cost per call. k-NN systems of many-dimensional features fill in nearly densely,
#: where a sparse LU (SuperLU) costs more than the dense one.
DENSE_SPEEDUP = 10
DENSE_OVERHEAD = 40_000
#: MiB of a float64 system held densely at most: fixed, so that which factorisation
#: solves a list, and so its rounding, depends on the list's size alone.
DENSE_SYSTEM_MEMORY = 16
#: Relative c below which the anchored solve's correction term has reached its c -> 0 limit.
SMALLEST_C = 1e-10
#: Relative weight of the distance beyond which a closed form has reached its c -> inf limit.
LARGEST_KAPPA = 1e12
#: Disagreement (log scale) of two items' null vectors below which a pair leaves them free.
#: The energy's curvature along the direction is of the order of its square: below about
#: 1e-12 of the prior's scale a float64 solve cannot tell it from 0 (it returned offsets
#: set by round-off, or a singular factorisation).
FREE_TOLERANCE = 1e-6


def components(matrix):
    """Connected-component label of every item of a symmetric sparse pattern."""
    return connected_components(sparse.csr_matrix(matrix), directed=False)[1]


def solve_anchored(prior, anchor, target, c, *, null):
    """Minimise ``z^T prior z + c sum_i anchor_i (z_i - target_i)^2`` for any ``c > 0``.

    ``prior`` is a graph Laplacian (plain or normalised) whose null space holds one
    vector ``null`` per connected component, ``anchor`` a positive diagonal. The
    minimiser solves ``(prior + c A) z = c A target``. It is split as
    ``z = sum_C a_C null_C + delta`` with ``delta`` A-orthogonal to every null vector:
    ``a_C = null_C^T A target / null_C^T A null_C`` (the component's anchored mean,
    exact whatever c) and ``delta`` of order ``c`` for small c. Solving for
    ``delta / c`` (c <= 1) or ``delta`` with the system divided by c (c > 1) keeps the
    system well scaled from c = 1e-300 to c = 1e300: a tiny c gives each component
    its anchored mean plus ``c`` times the limit correction, instead of the round-off
    of a near-singular solve.

    Returns
    -------
    z : ndarray
    info : dict
        ``status`` and ``n_iter``.
    """
    label = components(prior)
    anchored_null = anchor * null
    level = np.bincount(label, anchored_null * target) / np.bincount(label, anchored_null * null)
    base = level[label] * null
    residual = anchor * (target - base)
    if c <= 1:  # solve for f = delta / c; below SMALLEST_C, f has reached its c -> 0 limit
        floor = SMALLEST_C * prior.diagonal().mean() / anchor.mean()
        system, scale = prior + max(c, floor) * sparse.diags(anchor), c
    else:
        system, scale = prior / c + sparse.diags(anchor), 1.0
    system = sparse.csr_matrix(system)
    delta, info = solve_by_cost(system, residual, np.zeros_like(target),
                                factorise=lambda: factorised(system).solve(residual))
    # Remove the round-off along the nearly null vectors (exactly zero in theory).
    drift = np.bincount(label, anchored_null * delta) / np.bincount(label, anchored_null * null)
    delta = delta - drift[label] * null
    return base + scale * delta, info


def solve_by_cost(system, rhs, start, *, factorise):
    """Solve the symmetric ``system @ x = rhs`` the cheaper way: iterations or a factorisation.

    A factorisation costs ``factorisation_flops``: a dense LU's where the system fits
    ``DENSE_SYSTEM_MEMORY``, else at most a dense Cholesky's ``n^3 / 3`` operations (the
    fill of a k-NN graph of many-dimensional features comes close: its separators are
    large); a Jacobi-preconditioned conjugate-gradient iteration costs one product
    with ``system`` and a few vector operations. Conjugate gradients run from
    ``start`` for as many iterations as the factorisation would cost (at most 20 per
    unknown); if they stop short of ``TOLERANCE`` there, ``factorise()`` (exact
    whatever the conditioning) gives the solution instead, so a solve never costs
    much more than the cheaper of the two. Where a factorisation costs less than
    ``FEWEST_ITERATIONS`` iterations (small lists), it is used at once. Past 20
    iterations per unknown, conjugate gradients report their short stop.

    Returns
    -------
    x : ndarray
    info : dict
        ``status``, ``n_iter`` (0: factorised) and ``solver``.
    """
    n_items = len(rhs)
    iteration = 2 * system.nnz + 12 * n_items + ITERATION_OVERHEAD
    budget = factorisation_flops(n_items) / iteration
    if budget < FEWEST_ITERATIONS:
        return factorise(), factorised_info()
    scores, info = conjugate_gradients(system, rhs, start, max_iter=int(min(budget, 20 * n_items)))
    if info["status"] == "solved" or budget >= 20 * n_items:
        return scores, info
    return factorise(), factorised_info()


def factorised_info():
    """The ``info`` of a solve by factorisation: exact, no iterations."""
    return {"status": "solved", "n_iter": 0, "solver": "factorisation"}


def factorisation_flops(n_items):
    """What a factorisation costs, in the operations of a conjugate-gradient iteration
    (see ``ITERATION_OVERHEAD``): a dense LU's where the system is held densely, else a
    bound on a sparse one's (a dense Cholesky's operations, at the iterations' speed)."""
    if holds_densely(n_items):
        return 2 * n_items**3 / 3 / DENSE_SPEEDUP + DENSE_OVERHEAD
    return n_items**3 / 3


def holds_densely(n_items):
    """Whether a system of ``n_items`` unknowns is factorised densely: its float64
    matrix fits ``DENSE_SYSTEM_MEMORY``."""
    return 8 * n_items**2 <= DENSE_SYSTEM_MEMORY * 2**20


def factorised(system):
    """A factorisation of the symmetric ``system`` with a ``solve(rhs)`` method: a dense
    LU (``DenseLU``) where it is held densely, else a sparse one (``sparse_factorised``);
    a singular system is refused by name."""
    n_items = system.shape[0]
    if not holds_densely(n_items):
        return sparse_factorised(system)
    factors = DenseLU(system)
    if factors.singular:
        raise singular_system(n_items, "a zero pivot of its LU factorisation")
    return factors


class DenseLU:
    """LAPACK's LU factorisation (partial pivoting) of a sparse matrix held densely."""

    def __init__(self, system):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LinAlgWarning)  # a zero pivot: see singular
            self.factors = lu_factor(sparse.csr_matrix(system).toarray(), check_finite=False)
        self.singular = not np.all(np.diagonal(self.factors[0]))

    def solve(self, rhs):
        return lu_solve(self.factors, rhs, check_finite=False)


def sparse_factorised(system):
    """The sparse LU factorisation of the symmetric ``system`` with a symmetric
    fill-reducing ordering (minimum degree on its pattern, diagonal pivots)."""
    try:
        return splu(sparse.csc_matrix(system), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                    options={"SymmetricMode": True})
    except RuntimeError as error:  # scipy: "Factor is exactly singular"
        raise singular_system(system.shape[0], error) from error


def singular_system(n_items, reason):
    return ValueError(
        f"The reranking system of a list of {n_items} samples is singular "
        f"({reason}): its energy leaves the scores free in a direction not pinned. "
        "Try laplacian='unnormalized' or another pair strategy."
    )


def last_of_each_component(label):
    last_index = np.zeros(label.max() + 1, dtype=np.intp)
    np.maximum.at(last_index, label, np.arange(len(label)))
    last = np.zeros(len(label), dtype=bool)
    last[last_index] = True
    return last


def solve_pinned(system, rhs, *, pinned, start, direct=False):
    """Solve the symmetric positive semi-definite ``system @ r = rhs``, ``r_k = 0`` where pinned.

    ``pinned`` marks one item in each connected component on which ``system`` is
    singular (a Laplacian: the constants); ``rhs`` must be consistent there. The
    solve is Jacobi-preconditioned conjugate gradients from ``start`` or a sparse
    factorisation, whichever costs less (see ``solve_by_cost``): the systems are
    graph Laplacians plus positive terms, whose factorisations fill in badly on k-NN
    graphs of many-dimensional features, while a product with them costs one pass
    over their non-zeros. The caller places each component afterwards (conjugate
    gradients leave the pinned items free). ``direct`` factorises whatever the cost.
    """
    system = sparse.csr_matrix(system)

    def factorise():  # the pinned rows and columns replaced by the identity's: symmetric
        keep = sparse.diags((~pinned).astype(float))
        pinned_system = keep @ system @ keep + sparse.diags(pinned.astype(float))
        return factorised(pinned_system).solve(np.where(pinned, 0.0, rhs))

    if direct:
        return factorise(), factorised_info()
    return solve_by_cost(system, rhs, start, factorise=factorise)


def solve_two_scales(prior, pair_prior, pull, kappa, *, null, pinned, start):
    """Solve ``(L + kappa L_pairs) r = kappa pull`` accurately for any ``kappa > 0``.

    ``r = B o + delta``, with ``B`` the prior's null vectors (one column per connected
    component of the affinity graph): the offsets ``o`` between components, which the
    prior does not see, minimise the pair term alone (``B^T L_pairs B o = B^T pull``,
    whatever kappa); ``delta`` then solves ``(L + kappa L_pairs) delta = kappa (pull -
    L_pairs B o)``, whose right-hand side has no part along ``B``: computed as kappa
    times an O(1) solution for kappa <= 1, and with the system divided by kappa
    above (capped at ``LARGEST_KAPPA``, where the c -> inf limit is reached to 12
    digits). A tiny c thus keeps the offsets between components, a huge c the pairs.
    ``pinned`` marks one item per component on which the system is singular (the
    components the energy leaves free to move, see ``free_directions``).
    """
    n_items = len(pull)
    label = components(prior)
    basis = sparse.csr_matrix((null, (np.arange(n_items), label)), shape=(n_items, label.max() + 1))
    coarse = (basis.T @ pair_prior @ basis).tocsr()
    # Singular only on the components the energy leaves free (the caller pins one item
    # of each): pinning an offset elsewhere would set it wrong, which a tiny kappa keeps.
    coarse_pins = np.zeros(coarse.shape[0], dtype=bool)
    coarse_pins[label[pinned]] = True
    offsets, coarse_info = solve_pinned(coarse, basis.T @ pull, pinned=coarse_pins,
                                        start=np.zeros(coarse.shape[0]))
    base = basis @ offsets
    rest = pull - pair_prior @ base
    if kappa <= 1:  # below SMALLEST_C (relative) the O(1) solution has reached its limit
        floor = SMALLEST_C * prior.diagonal().mean() / max(pair_prior.diagonal().mean(), 1e-300)
        delta, info = solve_pinned(prior + max(kappa, floor) * pair_prior, rest, pinned=pinned,
                                   start=start)
        delta = kappa * delta
    else:
        capped = min(kappa, LARGEST_KAPPA)
        delta, info = solve_pinned(prior / capped + pair_prior, rest, pinned=pinned, start=start)
    return base + delta, (info if coarse_info["status"] == "solved" else coarse_info)


def place_components(scores, initial, label, has_pair, free, direction):
    """The shared rule for what the energy leaves free, per connected component.

    A component without any selected pair only feels the prior, minimised by any
    multiple of its null vector (``direction`` there): it gets the one whose mean is
    the mean of its initial scores (an isolated item keeps its initial score). A
    component with pairs that the energy still leaves free to move along
    ``direction`` (see ``free_directions``: every one under the plain Laplacian, a
    shift) is moved along it to the mean of its initial scores. Any other component is
    fully determined by the energy and stays as solved.
    """
    count = np.bincount(label)
    initial_mean = np.bincount(label, initial) / count
    direction_mean = np.bincount(label, direction) / count
    placed = scores.copy()
    loose = ~has_pair[label]
    placed[loose] = (initial_mean / direction_mean)[label[loose]] * direction[loose]
    moved = has_pair[label] & free[label]
    shift = (initial_mean - np.bincount(label, scores) / count) / direction_mean
    placed[moved] = scores[moved] + shift[label[moved]] * direction[moved]
    return placed


def free_directions(label, pairs, prior_label, null):
    """Which joined components the energy leaves free to move, and along which direction.

    The energies see the scores through the prior, blind to its null vectors (``null``
    on each component of the affinity graph, ``prior_label``), and through differences
    over the selected pairs. So a component of the graph joined with the pairs
    (``label``) may move along ``v`` when ``v`` is a null vector on each of its
    affinity components, ``v = a_C null``, and equal on the two items of every pair.
    Under the plain Laplacian (``null`` = 1) that is the constant, always. Under the
    normalised one (``null`` = sqrt(d)) the scales must meet ``a_C sqrt(d_i) =
    a_C' sqrt(d_j)`` on every pair: always without pairs, and with pairs when the
    degrees allow it (a regular graph: a list of two, or of duplicates). The scales
    are fitted in the log domain by least squares over the pairs; a component is free
    when every one of its pairs agrees to ``FREE_TOLERANCE``.

    Returns
    -------
    free : ndarray of bool, one per joined component
    direction : ndarray, one per item: ``a_C null``, with ``a_C = 1`` where there is
        nothing to agree with
    """
    high, low = pairs
    free = np.ones(label.max() + 1, dtype=bool)
    log_null = np.log(null)
    gap = log_null[high] - log_null[low]  # must equal log a_C(low) - log a_C(high)
    if not gap.any():
        return free, null.copy()
    n_affinity = prior_label.max() + 1
    source, target = prior_label[high], prior_label[low]
    coupling = pair_laplacian((source, target), np.ones(len(source)), n_affinity)  # no self-loops
    divergence = np.bincount(target, gap, n_affinity) - np.bincount(source, gap, n_affinity)
    # Factorised whatever its size (no iterative solve, whose status would go unseen):
    # one unknown per affinity component, far fewer than samples on a k-NN graph.
    log_scale, _ = solve_pinned(coupling, divergence, pinned=last_of_each_component(components(coupling)),
                                start=np.zeros(n_affinity), direct=True)
    disagreement = np.abs(log_scale[target] - log_scale[source] - gap)
    free[label[high[disagreement > FREE_TOLERANCE]]] = False
    return free, np.exp(log_scale[prior_label]) * null


def paired_components(label, pairs):
    """Whether each component holds at least one selected pair."""
    has_pair = np.zeros(label.max() + 1, dtype=bool)
    has_pair[label[pairs[0]]] = True
    return has_pair


def conjugate_gradients(system, rhs, start, max_iter=None):
    diagonal = system.diagonal()
    preconditioner = sparse.diags(
        np.divide(1.0, diagonal, out=np.ones_like(diagonal), where=diagonal > 0)
    )
    n_iter = 0

    def count(_):
        nonlocal n_iter
        n_iter += 1

    max_iter = 20 * len(rhs) if max_iter is None else max_iter
    scores, failed = cg(system, rhs, x0=start, rtol=TOLERANCE, atol=0.0, maxiter=max_iter,
                        M=preconditioner, callback=count)
    status = "maximum iterations reached" if failed else "solved"  # fit reports it
    return scores, {"status": status, "n_iter": n_iter, "solver": "conjugate gradients"}
