"""Datasets: the bundled WordNet reverse dictionary, retrieval sets of several shapes,
reranking tasks on emoji, WordNet categories and printed characters, tasks on
scikit-learn's digits, and synthetic generators."""

from ._digits import load_digits_reranking, load_digits_retrieval
from ._reranking import load_emoji_reranking, load_glyph_reranking, load_wordnet_reranking
from ._retrieval_sets import list_retrieval_sets, load_retrieval_set
from ._synthetic import make_hubness_sims
from ._wordnet import load_wordnet_revdict

__all__ = [
    "list_retrieval_sets",
    "load_digits_reranking",
    "load_digits_retrieval",
    "load_emoji_reranking",
    "load_glyph_reranking",
    "load_retrieval_set",
    "load_wordnet_reranking",
    "load_wordnet_revdict",
    "make_hubness_sims",
]
