"""Plain dense reference implementations, SPEC taken literally (slow, obvious)."""

import numpy as np
from scipy.special import logsumexp


def inverted_softmax(query_sims, bank_sims, beta):
    """The Inverted Softmax in similarity units: s - (c_j - mean_j c_j), c = logsumexp / beta."""
    soft_max = logsumexp(beta * bank_sims, axis=0) / beta
    return query_sims - (soft_max - soft_max.mean())


def inverted_softmax_probability(query_sims, bank_sims, beta):
    return np.exp(beta * query_sims) / np.exp(beta * bank_sims).sum(axis=0)


def activation_set(bank_sims, k):
    order = np.argsort(-bank_sims, axis=1, kind="stable")
    return set(order[:, :k].ravel().tolist())


def dynamic_inverted_softmax(query_sims, bank_sims, beta, k):
    activated = activation_set(bank_sims, k)
    normalized = inverted_softmax(query_sims, bank_sims, beta)
    out = np.array(query_sims, dtype=np.float64)
    for q, row in enumerate(query_sims):
        if int(np.argmax(row)) in activated:
            out[q] = normalized[q]
    return out


def csls(query_sims, bank_sims, k):
    r_bank = np.sort(bank_sims, axis=0)[-k:].mean(axis=0)
    r_gallery = np.sort(query_sims, axis=1)[:, -k:].mean(axis=1)
    return 2 * query_sims - r_gallery[:, None] - r_bank[None, :]


def centering(query_sims, bank_sims):
    return query_sims - bank_sims.mean(axis=0)


def gc_rank(query_sims, bank_sims):
    """Rank_g(q) = #{b : s(b, g) > s(q, g)} for every query and item."""
    return (bank_sims[None, :, :] > query_sims[:, None, :]).sum(axis=1)


def gc_order_keys(query_sims, bank_sims):
    """Per row, a dense rank of the lexicographic key (-Rank, s): higher = retrieved first."""
    ranks = gc_rank(query_sims, bank_sims)
    dense = np.empty(query_sims.shape, dtype=np.int64)
    for q in range(len(query_sims)):
        keys = list(zip(-ranks[q], query_sims[q]))
        distinct = sorted(set(keys))
        position = {key: i for i, key in enumerate(distinct)}
        dense[q] = [position[key] for key in keys]
    return dense


def dense_rank_rows(scores):
    out = np.empty(scores.shape, dtype=np.int64)
    for q, row in enumerate(scores):
        distinct = np.unique(row)
        out[q] = np.searchsorted(distinct, row)
    return out


def correct_ranks(sims, gt):
    """Average tied positions, one query at a time."""
    ranks = []
    for row, target in zip(sims, gt):
        order = sorted(range(len(row)), key=lambda j: -row[j])
        positions = [p for p, j in enumerate(order) if row[j] == row[target]]
        ranks.append(np.mean(positions))
    return np.array(ranks)


def k_occurrence(sims, k):
    counts = np.zeros(sims.shape[1], dtype=np.int64)
    for row in sims:
        for j in np.argsort(-row, kind="stable")[:k]:
            counts[j] += 1
    return counts


# -- NNN, DN, querybank z-norm, mutual proximity (SPEC, "Later methods") ----------------


def nnn(query_sims, bank_sims, k, alpha):
    """s(q, g) - alpha * (mean of the k largest s(b, g) over the bank)."""
    return query_sims - alpha * np.sort(bank_sims, axis=0)[-k:].mean(axis=0)


def weighted_centering(query_sims, bank_sims, weight):
    """DN: s(q, g) - weight * mean_b s(b, g)."""
    return query_sims - weight * bank_sims.mean(axis=0)


def _scale(std):
    return np.where(std == 0, 1.0, std)


def querybank_z_norm(query_sims, bank_sims):
    """(s - mu_g) / sigma_g over the bank, population std; a zero sigma taken as 1."""
    return (query_sims - bank_sims.mean(axis=0)) / _scale(bank_sims.std(axis=0))


def mutual_proximity_gaussian(query_sims, bank_sims):
    """log Phi((s - mu_g) / sigma_g) + log Phi((s - mu_q) / sigma_q)."""
    from scipy.special import log_ndtr

    row_z = (query_sims - query_sims.mean(axis=1, keepdims=True)) / _scale(
        query_sims.std(axis=1, keepdims=True)
    )
    return log_ndtr(querybank_z_norm(query_sims, bank_sims)) + log_ndtr(row_z)


def mutual_proximity_empiric(query_sims, bank_sims):
    """log of the mid-distribution fractions: ties half, s itself one of the ties."""
    n_bank, n_gallery = bank_sims.shape[0], query_sims.shape[1]
    bank = bank_sims[None, :, :]  # (1, M, N) against (Q, 1, N)
    s = query_sims[:, None, :]
    bank_share = ((bank < s).sum(axis=1) + ((bank == s).sum(axis=1) + 1) / 2) / (n_bank + 1)
    row = query_sims[:, None, :]  # row[q, 0, j] = s(q, j), against s(q, g) at [q, g, 0]
    own = query_sims[:, :, None]
    row_share = ((row < own).sum(axis=2) + (row == own).sum(axis=2) / 2) / n_gallery
    return np.log(bank_share) + np.log(row_share)
