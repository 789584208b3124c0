"""Small data makers and orderings that several test modules share (import as ``helpers``)."""

import numpy as np

from skqbnorm.normalizers import BiasFormMixin, Capabilities, QueryBankNormalizer

# A 3-item bank over a 2-item gallery, small enough to check scores by hand.
GC_BANK = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])


def stable_ranking(scores):
    """Each row's gallery indices, best first; ties go to the lowest index."""
    return np.argsort(-scores, axis=1, kind="stable")


def quiet(estimator):
    """The estimator running all its iterations (the module ignores ConvergenceWarning)."""
    return estimator.set_params(tol=0.0)


def tolerance(dtype, magnitude=1.0):
    if dtype == np.float32:
        return {"rtol": 1e-4, "atol": 1e-4 * magnitude}
    return {"rtol": 1e-10, "atol": 1e-10 * magnitude}


def sims_pair(rng, n_queries=40, n_bank=60, n_gallery=25, scale=1.0, dtype=np.float64):
    bank = rng.normal(size=(n_bank, n_gallery)) * scale
    queries = rng.normal(size=(n_queries, n_gallery)) * scale
    return queries.astype(dtype), bank.astype(dtype)


def sims_pair_with_hubs(rng, n_queries=40, n_bank=60, n_gallery=25, dtype=np.float64):
    bank = rng.normal(size=(n_bank, n_gallery))
    bank[:, :3] += 1.0  # three hubs
    return rng.normal(size=(n_queries, n_gallery)).astype(dtype), bank.astype(dtype)


def tied_matrix(rng, shape, values=(0.0, 0.5, 1.0)):
    return rng.choice(np.array(values), size=shape)


N_QUERIES, N_GALLERY = 40, 30


def pair_of_rankings(seed, relevance=False):
    """Two score matrices of the same queries, rounded so that many scores tie."""
    rng = np.random.default_rng(seed)
    if relevance:
        gt = rng.random((N_QUERIES, N_GALLERY)) < 0.04
        gt[np.arange(N_QUERIES), rng.integers(0, N_GALLERY, N_QUERIES)] = True
        signal = gt.astype(float)
    else:
        gt = rng.integers(0, N_GALLERY, N_QUERIES)
        signal = np.eye(N_GALLERY)[gt]
    a = np.round(rng.normal(size=(N_QUERIES, N_GALLERY)) + signal, 1)
    b = np.round(a + rng.normal(scale=0.7, size=a.shape) + 0.4 * signal, 1)
    return a, b, gt


def unit_rows(values):
    return values / np.linalg.norm(values, axis=1, keepdims=True)


def strong_model_task(n_gallery=400, n_dims=32, noise=0.25, shift=0.0, seed=0):
    """Embeddings of a strong model's retrieval task: (bank, queries, gallery).

    Each query lies near its own gallery item (its answer); each bank query near an
    item of the same distribution that is not in the gallery. ``shift`` moves every
    query along one random direction (a domain the bank does not share).
    """
    rng = np.random.default_rng(seed)
    items = unit_rows(rng.normal(size=(3 * n_gallery, n_dims)))
    gallery, unseen = items[:n_gallery], items[n_gallery:]
    queries = gallery + noise * rng.normal(size=gallery.shape) / np.sqrt(n_dims)
    queries += shift * unit_rows(rng.normal(size=(1, n_dims)))
    bank = unseen + noise * rng.normal(size=unseen.shape) / np.sqrt(n_dims)
    return bank, queries, gallery


def stable_top_k(values, k):
    """Each row's k largest entries and their indices, by a full stable sort (ties to the
    lowest index)."""
    order = np.argsort(-values, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(values, order, axis=1)


def column_top_k_mean(values, k):
    """The mean of each column's k largest entries, by a full sort."""
    return np.sort(values, axis=0)[len(values) - k :].mean(axis=0)


def top_k_matrices(rng):
    """Continuous, heavily tied, sorted (every row beats the floor) and constant columns."""
    yield rng.normal(size=(300, 23))
    yield rng.integers(-3, 3, size=(257, 19)).astype(np.float32)
    yield np.sort(rng.normal(size=(200, 17)), axis=0)  # ascending: each row a candidate
    yield np.sort(rng.normal(size=(200, 17)), axis=0)[::-1].copy()  # descending: none after the start
    yield np.full((90, 11), 0.25)


def clustered_list(seed, n_items=40, n_features=5, n_clusters=4):
    """Features in clusters, a query near the first cluster, and its cosines to the items."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, n_features))
    labels = rng.integers(n_clusters, size=n_items)
    features = centres[labels] + rng.normal(scale=0.6, size=(n_items, n_features))
    query = centres[0] + rng.normal(scale=0.6, size=n_features)
    initial = unit_rows(features) @ (query / np.linalg.norm(query))
    return features, initial, query


def same_ranking(scores, expected, tie=1e-9):
    """Every pair the reference orders (by more than ``tie``) is ordered alike; the Jaccard
    distance has exact ties (items sharing their whole encoding) that rounding may split."""
    ordered = expected[:, None] > expected[None, :] + tie
    return bool(np.all((scores[:, None] > scores[None, :])[ordered]))


class ColumnMax:
    """The bank's largest similarity to each gallery item (any split gives the same)."""

    def __init__(self, n_gallery):
        self.value = np.full(n_gallery, -np.inf)

    def update(self, block, rows):
        np.maximum(self.value, block.max(axis=0), out=self.value)

    def merge(self, other):
        np.maximum(self.value, other.value, out=self.value)

    def result(self):
        return self.value


class HalfMax(BiasFormMixin, QueryBankNormalizer):
    """A toy plug-in normaliser: s(q, g) less half the querybank's largest similarity to
    g, which it declares as a top-k mean (k = 1) scaled by 1/2 (its ``item_bias``)."""

    capabilities = Capabilities(bias_form=True, index="bias", item_bias="top_k_mean")

    def _reducers(self, n_bank, n_gallery, dtype):
        return [ColumnMax(n_gallery)]

    def _learn(self, reducers):
        self.bank_max_ = reducers[0].result()

    def _gallery_bias(self):
        return self.bank_max_ / 2

    def _score(self, sims, columns, row_state, out):
        np.subtract(sims, (self.bank_max_[columns] / 2).astype(sims.dtype), out=out)

    def _item_bias_parameters(self):
        return {"k": 1, "scale": 0.5}

