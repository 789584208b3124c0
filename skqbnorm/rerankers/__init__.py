"""Bayesian rerankers: refine an initial ranking by visual consistency."""

from ._base import BayesianReranker
from ._baselines import PointwiseReranker, RandomWalkReranker
from ._cv import RerankerCV
from ._hinge import HingeReranker
from ._preference import PreferenceStrengthReranker

__all__ = [
    "BayesianReranker",
    "HingeReranker",
    "PointwiseReranker",
    "PreferenceStrengthReranker",
    "RandomWalkReranker",
    "RerankerCV",
]
