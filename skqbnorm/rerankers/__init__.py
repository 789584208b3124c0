"""Rerankers: refine an initial ranking by visual consistency (Bayesian rerankers) or by
the neighbourhoods of the results (k-reciprocal, diffusion, query expansion)."""

from ._base import BayesianReranker
from ._baselines import PointwiseReranker, RandomWalkReranker
from ._cv import RerankerCV
from ._diffusion import DiffusionReranker
from ._hinge import HingeReranker
from ._kreciprocal import KReciprocalReranker
from ._preference import PreferenceStrengthReranker
from ._query_expansion import QueryExpansionReranker

__all__ = [
    "BayesianReranker",
    "DiffusionReranker",
    "HingeReranker",
    "KReciprocalReranker",
    "PointwiseReranker",
    "PreferenceStrengthReranker",
    "QueryExpansionReranker",
    "RandomWalkReranker",
    "RerankerCV",
]
