"""
===================================
R@1 against querybank size
===================================

How large must a querybank be? Random subsets of the in-domain bank of the bundled
WordNet reverse dictionary (definitions of other nouns), from 50 to all 4,000 queries,
fit the Inverted Softmax (IS) and the Dynamic Inverted Softmax (DIS). Each size is drawn
five times; the plot shows the change in R@1 against the raw similarities, the mean
over the draws with the range of the draws as a band, and a 95% paired bootstrap
interval over the test queries for the first draw
(:func:`~skqbnorm.metrics.paired_comparison`).
"""

import matplotlib.pyplot as plt
import numpy as np

from skqbnorm import DynamicInvertedSoftmax, InvertedSoftmax
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.metrics import paired_comparison, retrieval_metrics

data = load_wordnet_revdict()
gallery_t = data.gallery_embeddings.T
query_sims = data.query_embeddings @ gallery_t
bank_sims = data.bank_embeddings @ gallery_t
raw_r1 = retrieval_metrics(query_sims, data.query_gt)["R@1"]
sizes = [50, 100, 200, 500, 1000, 2000, 4000]
n_draws = 5
rng = np.random.default_rng(0)
methods = {"IS": InvertedSoftmax, "DIS": DynamicInvertedSoftmax}
changes = {name: np.empty((len(sizes), n_draws)) for name in methods}
intervals = {name: np.empty((len(sizes), 2)) for name in methods}
for i, size in enumerate(sizes):
    for draw in range(n_draws):
        rows = rng.choice(len(bank_sims), size, replace=False)
        for name, method in methods.items():
            scores = method().fit(bank_sims[rows]).transform(query_sims)
            if draw == 0:  # the paired interval over the test queries, for one draw
                comparison = paired_comparison(query_sims, scores, data.query_gt, k=1,
                                               n_resamples=2000, random_state=0)
                intervals[name][i] = comparison.interval["R@1"]
            changes[name][i, draw] = retrieval_metrics(scores, data.query_gt)["R@1"] - raw_r1
    print(f"{size:5d} queries: " + ", ".join(
        f"{name} {changes[name][i].mean():+.2f}" for name in methods))

# %%
# Gains grow quickly up to a few hundred queries and flatten after a few thousand: a
# random sample of a few thousand training queries is enough, as the QB-Norm paper
# found. The whiskers (one draw) are wider than the spread between draws: at this test
# set size, the queries themselves are the main source of uncertainty.
fig, ax = plt.subplots(figsize=(7, 4))
for shift, (name, values) in zip((0.97, 1.03), changes.items()):
    x = np.array(sizes) * shift
    mean = values.mean(axis=1)
    line = ax.plot(x, mean, marker="o", label=f"{name}, mean of {n_draws} draws")[0]
    ax.fill_between(x, values.min(axis=1), values.max(axis=1), alpha=0.2,
                    color=line.get_color())
    low, high = intervals[name].T
    ax.errorbar(x, values[:, 0], yerr=[values[:, 0] - low, high - values[:, 0]], fmt="none",
                capsize=2, color=line.get_color(), alpha=0.6)
ax.axhline(0, color="black", linestyle="--", linewidth=1)
ax.set_xscale("log")
ax.set_xlabel("querybank size (queries)")
ax.set_ylabel("change in R@1 against raw (points)")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()
