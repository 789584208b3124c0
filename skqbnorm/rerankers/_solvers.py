"""The sparse symmetric solve shared by the closed-form rerankers."""

import warnings

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import cg, splu
from sklearn.exceptions import ConvergenceWarning

#: Relative residual at which conjugate gradients stop.
TOLERANCE = 1e-10
#: Lists up to this size are solved by a direct sparse factorisation.
DIRECT_MAX_SIZE = 2000


def solve_graph_system(system, rhs, *, start, shift_to=None):
    """Solve the symmetric positive (semi-)definite ``system @ r = rhs``.

    Lists of up to ``DIRECT_MAX_SIZE`` samples are factorised directly (exact,
    whatever the conditioning). Larger ones use Jacobi-preconditioned conjugate
    gradients from ``start``: the systems are graph Laplacians plus positive
    terms, whose factorisations fill in badly on k-NN graphs of high-dimensional
    features, while a product with them costs one pass over their non-zeros.

    With ``shift_to``, the system is a Laplacian whose null space holds the
    constants of each connected component (``rhs`` sums to zero on each, so the
    system is consistent): the solution is fixed up to a shift per component,
    and each component is shifted so that its mean equals that of ``shift_to``.
    SPEC's pinned score is one such choice; this one keeps the scores on the
    initial list's scale.

    Returns
    -------
    scores : ndarray
    info : dict
        ``status`` ("solved" or "maximum iterations reached") and ``n_iter``.
    """
    system = sparse.csr_matrix(system)
    if shift_to is not None:
        _, component = connected_components(system, directed=False)
    if len(rhs) <= DIRECT_MAX_SIZE:
        if shift_to is not None:  # SPEC's pin: one score per component replaced by 0
            system, rhs = pin_one_per_component(system, rhs, component)
        scores, info = splu(sparse.csc_matrix(system)).solve(rhs), {"status": "solved", "n_iter": 0}
    else:
        scores, info = conjugate_gradients(system, rhs, start)
    if shift_to is not None:
        offset = np.bincount(component, shift_to - scores) / np.bincount(component)
        scores = scores + offset[component]
    return scores, info


def pin_one_per_component(system, rhs, component):
    """Replace the row of each component's last sample by that of ``r_k = 0``."""
    last_index = np.zeros(component.max() + 1, dtype=np.intp)
    np.maximum.at(last_index, component, np.arange(len(rhs)))
    last = np.zeros(len(rhs), dtype=bool)
    last[last_index] = True
    pinned = sparse.diags((~last).astype(float)) @ system + sparse.diags(last.astype(float))
    return pinned, np.where(last, 0.0, rhs)


def conjugate_gradients(system, rhs, start):
    diagonal = system.diagonal()
    preconditioner = sparse.diags(np.divide(1.0, diagonal, out=np.ones_like(diagonal), where=diagonal > 0))
    n_iter = 0

    def count(_):
        nonlocal n_iter
        n_iter += 1

    max_iter = 20 * len(rhs)
    scores, failed = cg(system, rhs, x0=start, rtol=TOLERANCE, atol=0.0, maxiter=max_iter,
                        M=preconditioner, callback=count)
    status = "solved"
    if failed:
        status = "maximum iterations reached"
        warnings.warn(
            f"Conjugate gradients stopped after {n_iter} iterations without reaching a "
            f"relative residual of {TOLERANCE}; the scores may be inaccurate.",
            ConvergenceWarning,
            stacklevel=2,
        )
    return scores, {"status": status, "n_iter": n_iter}
