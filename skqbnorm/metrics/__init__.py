"""Retrieval metrics, hubness measures and scorers."""

from ._hubness import hubness, hubness_from_counts, k_occurrence
from ._retrieval import correct_item_ranks, recall_at_k, retrieval_metrics
from ._scorers import make_retrieval_scorer

__all__ = [
    "correct_item_ranks",
    "hubness",
    "hubness_from_counts",
    "k_occurrence",
    "make_retrieval_scorer",
    "recall_at_k",
    "retrieval_metrics",
]
