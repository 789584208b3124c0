"""Retrieval metrics, hubness measures, ranking quality and distances, and scorers."""

from ._attacks import (
    HubCapture,
    HubOutliers,
    hub_capture,
    hub_outliers,
    planted_recall_change,
)
from ._hubness import hubness, hubness_from_counts, k_occurrence
from ._paired import PairedComparison, PairedMeanChange, paired_comparison, paired_mean_change
from ._querybank import QueryBankDiagnostics, QueryBankWarning, querybank_diagnostics
from ._ranking import (
    average_precision,
    average_precisions,
    discordant_pairs,
    hinge_distance,
    mean_average_precision,
    ordered_pairs,
    pointwise_distance,
    preference_strength_distance,
)
from ._retrieval import correct_item_ranks, recall_at_k, retrieval_metrics
from ._scorers import make_map_scorer, make_retrieval_scorer

__all__ = [
    "HubCapture",
    "HubOutliers",
    "PairedComparison",
    "PairedMeanChange",
    "QueryBankDiagnostics",
    "QueryBankWarning",
    "average_precision",
    "average_precisions",
    "correct_item_ranks",
    "discordant_pairs",
    "hinge_distance",
    "hub_capture",
    "hub_outliers",
    "hubness",
    "hubness_from_counts",
    "k_occurrence",
    "make_map_scorer",
    "make_retrieval_scorer",
    "mean_average_precision",
    "ordered_pairs",
    "paired_comparison",
    "paired_mean_change",
    "planted_recall_change",
    "pointwise_distance",
    "preference_strength_distance",
    "querybank_diagnostics",
    "recall_at_k",
    "retrieval_metrics",
]
