"""skqbnorm: hubness-aware cross-modal retrieval for scikit-learn.

Querybank normalisers (transformers over query-by-gallery similarity matrices) and
Bayesian rerankers (estimators that refine an initial ranking by visual consistency).
"""

from .normalisers import (
    CSLS,
    Centering,
    DualDynamicInvertedSoftmax,
    DualInvertedSoftmax,
    DualSoftmax,
    DynamicInvertedSoftmax,
    GloballyCorrected,
    InvertedSoftmax,
    SinkhornNormalisation,
)
from .rerankers import (
    HingeReranker,
    PointwiseReranker,
    PreferenceStrengthReranker,
    RandomWalkReranker,
)

__version__ = "0.1.0"

__all__ = [
    "CSLS",
    "Centering",
    "DualDynamicInvertedSoftmax",
    "DualInvertedSoftmax",
    "DualSoftmax",
    "DynamicInvertedSoftmax",
    "GloballyCorrected",
    "HingeReranker",
    "InvertedSoftmax",
    "PointwiseReranker",
    "PreferenceStrengthReranker",
    "RandomWalkReranker",
    "SinkhornNormalisation",
    "__version__",
]
