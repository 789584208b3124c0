"""Querybank normalisers: scikit-learn transformers that rescale query similarities."""

from ._base import QueryBankNormaliser
from ._centering import Centering
from ._csls import CSLS
from ._gc import GloballyCorrected
from ._softmax import DynamicInvertedSoftmax, InvertedSoftmax

__all__ = [
    "CSLS",
    "Centering",
    "DynamicInvertedSoftmax",
    "GloballyCorrected",
    "InvertedSoftmax",
    "QueryBankNormaliser",
]
