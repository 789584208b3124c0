"""Datasets: the bundled WordNet reverse dictionary, tasks on scikit-learn's digits,
and synthetic generators."""

from ._digits import load_digits_reranking, load_digits_retrieval
from ._synthetic import make_hubness_sims
from ._wordnet import load_wordnet_revdict

__all__ = [
    "load_digits_reranking",
    "load_digits_retrieval",
    "load_wordnet_revdict",
    "make_hubness_sims",
]
