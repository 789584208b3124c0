"""Plain dense references of the neighbourhood rerankers, from the papers' formulas.

Slow and obvious: full matrices, Python sets, explicit vectors. Ties between equal
distances go to the lower index (stable sorts), as in the estimators.
"""

import numpy as np
from scipy.optimize import minimize

from skqbnorm.rerankers._graph import affinity


def unit(rows):
    rows = np.asarray(rows, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def node_similarities(features, query_sims):
    """The (n + 1) x (n + 1) similarities of the query (first) and the items."""
    x = unit(features)
    n = len(x)
    s = np.empty((n + 1, n + 1))
    s[1:, 1:] = x @ x.T
    s[0, 1:] = s[1:, 0] = query_sims
    np.fill_diagonal(s, 1.0)
    return s


def k_reciprocal(distances, k1, k2, lambda_value):
    """Zhong et al. (CVPR 2017), eqs. (3)-(13), on a full distance matrix, query first.

    Returns the final distance from node 0 to nodes 1..n.
    """
    d = np.asarray(distances, dtype=np.float64)
    row_max = d.max(axis=1, keepdims=True)
    d = np.divide(d, row_max, out=np.zeros_like(d), where=row_max > 0)
    n = len(d)
    order = np.argsort(d, axis=1, kind="stable")

    def nearest(i, k):  # N(i, k): the k + 1 nearest, i itself included
        return set(order[i, : k + 1].tolist())

    def reciprocal(i, k):  # R(i, k)
        return {j for j in nearest(i, k) if i in nearest(j, k)}

    half = int(np.around(k1 / 2.0))  # numpy rounds halves to even, as the published code
    v = np.zeros((n, n))
    for i in range(n):
        r = reciprocal(i, k1)
        expanded = set(r)
        for c in r:
            rc = reciprocal(c, half)
            if len(rc & r) > 2.0 / 3 * len(rc):
                expanded |= rc
        members = sorted(expanded)
        weights = np.exp(-d[i, members])
        v[i, members] = weights / weights.sum()
    if k2 > 1:
        v = np.array([v[order[i, :k2]].mean(axis=0) for i in range(n)])
    jaccard = 1.0 - np.minimum(v[0], v).sum(axis=1) / np.maximum(v[0], v).sum(axis=1)
    return ((1 - lambda_value) * jaccard + lambda_value * d[0])[1:]


def diffusion(features, initial, alpha, k, gamma, n_source):
    """Iscen et al. (CVPR 2017): mutual k-NN affinities s^gamma, f = (I - alpha W)^-1 y,
    y = max(r, 0)^gamma on the n_source highest of r = initial / max |initial|."""
    x = unit(features)
    s = x @ x.T
    np.fill_diagonal(s, 1.0)
    n = len(s)
    order = np.argsort(-s, axis=1, kind="stable")
    knn = np.zeros((n, n), dtype=bool)
    for i in range(n):
        knn[i, order[i, : k + 1]] = True  # k + 1 most similar, itself included
    a = np.where(knn & knn.T, np.maximum(s, 0.0) ** gamma, 0.0)
    np.fill_diagonal(a, 0.0)
    degree = a.sum(axis=1)
    inv = np.array([1 / np.sqrt(g) if g > 0 else 0.0 for g in degree])
    w = inv[:, None] * a * inv[None, :]
    r = np.asarray(initial, dtype=np.float64) / np.abs(initial).max()
    y = np.zeros(n)
    for i in np.argsort(-r, kind="stable")[:n_source]:
        y[i] = max(r[i], 0.0) ** gamma
    return np.linalg.solve(np.eye(n) - alpha * w, y)


def alpha_qe_dba(features, query, alpha, n_query, n_database):
    """Radenovic et al. (TPAMI 2018) on explicit vectors: DBA, then alpha-QE, then cosines."""
    x = unit(features)
    q = query / np.linalg.norm(query)
    if n_database > 0:
        s = x @ x.T
        np.fill_diagonal(s, 1.0)
        order = np.argsort(-s, axis=1, kind="stable")
        augmented = np.zeros_like(x)
        for j in range(len(x)):
            for m in order[j, : n_database + 1]:
                augmented[j] += max(s[j, m], 0.0) ** alpha * x[m]
        x = unit(augmented)
    if n_query > 0:
        sims = x @ q
        top = np.argsort(-sims, kind="stable")[:n_query]
        expanded = q + sum(max(sims[i], 0.0) ** alpha * x[i] for i in top)
        q = expanded / np.linalg.norm(expanded)
    return x @ q


# -- the Bayesian rerankers' energies: data, Laplacians, pairs, a plain minimiser ----------


def two_clusters(rng, n=30, gap=3.0):
    """Features of two clusters ``gap`` apart in the plane, and random initial scores."""
    features = np.r_[rng.normal(0, 0.3, size=(n // 2, 2)), rng.normal(gap, 0.3, size=(n - n // 2, 2))]
    return features, rng.normal(size=n)


def dense_laplacian(features, **graph):
    """``diag(W 1) - W`` of the library's affinities, written out here."""
    weights = affinity(features, **graph).toarray()
    return np.diag(weights.sum(axis=1)) - weights


def normalized_laplacian(features, **graph):
    """``I - D^-1/2 W D^-1/2`` of the library's affinities, written out here."""
    weights = affinity(features, **graph).toarray()
    inv_sqrt = 1 / np.sqrt(weights.sum(axis=1))
    return np.eye(len(weights)) - inv_sqrt[:, None] * weights * inv_sqrt[None, :]


def rho_pairs(initial, rho):
    """The (better, worse) pairs at most ``rho`` apart in the initial ranking, by a loop."""
    order = np.argsort(-initial, kind="stable")
    return np.array([(order[p], order[p + d]) for d in range(1, rho + 1) for p in range(len(order) - d)])


def bfgs(energy, x0):
    """scipy's BFGS result for ``energy`` from ``x0``, to a tight gradient tolerance."""
    return minimize(energy, x0, method="BFGS", options={"gtol": 1e-11, "maxiter": 50000})


def bfgs_minimum(energy, x0):
    """scipy's BFGS minimiser of ``energy`` from ``x0`` and the energy there."""
    result = minimize(energy, x0, method="BFGS", options={"gtol": 1e-10, "maxiter": 20000})
    return result.x, result.fun
