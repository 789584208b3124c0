"""Linear solves shared by the closed-form rerankers."""

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import lsqr, splu


def solve_laplacian_system(system, rhs, *, singular_on_constants, anchor):
    """Solve ``system @ r = rhs`` where ``system`` may be singular on constants.

    With ``singular_on_constants`` (a graph Laplacian plus PSD terms whose null
    space is the constant vector on each connected component), one score per
    component is pinned to 0 — SPEC's "replace the last row by [0 .. 0 1]" — and
    each component is then shifted so that its mean equals the mean of ``anchor``
    over the component: the energy does not see the shift, and the scores stay on
    the scale of the initial list. Otherwise the system is factorised directly, and
    a singular one falls back to the minimum-norm least-squares solution.
    """
    system = sparse.csc_matrix(system)
    if not singular_on_constants:
        try:
            return splu(system).solve(rhs)
        except RuntimeError:  # exactly singular
            return lsqr(system, rhs, atol=1e-12, btol=1e-12)[0]
    n_components, component = connected_components(system, directed=False)
    pinned = np.zeros(len(rhs), dtype=bool)
    pinned[np.maximum.reduceat(np.argsort(component, kind="stable"), _starts(component))] = True
    keep = sparse.diags((~pinned).astype(float))
    pinned_system = keep @ system + sparse.diags(pinned.astype(float))
    scores = splu(sparse.csc_matrix(pinned_system)).solve(np.where(pinned, 0.0, rhs))
    shift = np.bincount(component, anchor - scores) / np.bincount(component)
    return scores + shift[component]


def _starts(component):
    counts = np.bincount(component)
    return np.concatenate([[0], np.cumsum(counts)[:-1]])
