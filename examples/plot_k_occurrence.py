"""
=========================================
Hubs before and after normalisation
=========================================

A gallery item's *k-occurrence* :math:`N_k(g)` counts the queries that have it among
their top k. Without hubness every item would be retrieved about k times; in the raw
similarities of the bundled WordNet reverse dictionary a few nouns sit in the top 10 of
very many definitions while many are never retrieved at all (antihubs). Querybank
normalisation with an in-domain bank flattens the distribution.
"""

import matplotlib.pyplot as plt

from skqbnorm import DynamicInvertedSoftmax, InvertedSoftmax
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.metrics import hubness, k_occurrence
from skqbnorm.plotting import plot_k_occurrence

data = load_wordnet_revdict()
gallery = data.gallery_embeddings
query_sims = data.query_embeddings @ gallery.T
bank_sims = data.bank_embeddings @ gallery.T

settings = {
    "raw": query_sims,
    "IS (beta=20)": InvertedSoftmax(beta=20).fit(bank_sims).transform(query_sims),
    "DIS (beta=20, k=1)": DynamicInvertedSoftmax(beta=20, k=1)
    .fit(bank_sims)
    .transform(query_sims),
}

# %%
# The skewness of :math:`N_{10}` summarises hubness: it falls from above 2 to below 1.
for name, scores in settings.items():
    print(f"{name:20s} skewness {hubness(scores, k=10)['skewness']:.2f}")

# %%
# The histograms, on a logarithmic count axis: the long right tail (hubs) shrinks and
# fewer items sit at zero.
fig, ax = plt.subplots(figsize=(7, 4))
counts = {name: k_occurrence(scores, k=10) for name, scores in settings.items()}
plot_k_occurrence(counts, k=10, ax=ax)
fig.tight_layout()
plt.show()
