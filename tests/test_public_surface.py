"""The public methods of every estimator, beyond scikit-learn's own, against a written list.

A normaliser shows what a scikit-learn transformer does plus ``similarities`` and
``top_k`` (and ``gallery_bias`` for a bias form, the one fact a user needs to serve it
in an engine of their own); what an index asks of it goes through
:func:`skqbnorm.normalizers.index_serving`. A new public method fails here until it is
added to the list on purpose.
"""

import re

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.preprocessing import StandardScaler

from skqbnorm import (
    InvertedSoftmax,
    LiveQueryBank,
    QueryBankGate,
    QueryBankSearchCV,
    RerankerCV,
    catalogue,
)
from skqbnorm.index import NormalizedIndex

#: scikit-learn generates ``set_<method>_request`` for every method that takes metadata.
METADATA_REQUEST = re.compile(r"set_\w+_request$")

NORMALIZER = {"similarities", "top_k"}
BIAS_FORM = NORMALIZER | {"gallery_bias"}
RERANKER = {"fit", "fit_predict", "rerank_path"}
ALLOWED = {
    QueryBankGate: NORMALIZER,
    NormalizedIndex: {"fit", "partial_fit", "refresh", "search", "recall"},
    RerankerCV: {"fit", "fit_predict"},
    QueryBankSearchCV: {"fit", "transform", "similarities", "top_k"},
    LiveQueryBank: {"fit", "transform", "similarities", "top_k"},
}


def base_of(cls):
    """What a class adds to: ``StandardScaler`` for a transformer, else ``BaseEstimator``."""
    return StandardScaler if issubclass(cls, TransformerMixin) else BaseEstimator


def public_methods(cls):
    """The public methods of ``cls`` that its scikit-learn base does not have."""
    inherited = set(dir(base_of(cls)))
    return {
        name for name in dir(cls)
        if not name.startswith("_") and name not in inherited and not METADATA_REQUEST.match(name)
        and callable(getattr(cls, name, None)) and not isinstance(getattr(cls, name), type)
    }


def allowed(cls):
    if cls in ALLOWED:
        return ALLOWED[cls]
    if cls in catalogue.rerankers():
        return RERANKER
    return BIAS_FORM if cls.capabilities.bias_form else NORMALIZER


ESTIMATORS = [*catalogue.normalizers(), *catalogue.rerankers(), *ALLOWED]


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda cls: cls.__name__)
def test_public_methods_are_the_listed_ones(cls):
    assert public_methods(cls) == allowed(cls)


def test_a_fitted_normalizer_shows_no_more_than_its_class(rng):
    fitted = InvertedSoftmax().fit(rng.normal(size=(30, 8)), gallery=rng.normal(size=(12, 8)))
    shown = {name for name in dir(fitted)
             if not name.startswith("_") and callable(getattr(fitted, name))}
    assert shown - set(dir(StandardScaler)) - {"set_similarities_request", "set_top_k_request"} == BIAS_FORM


def test_a_new_public_method_is_caught():
    class Louder(InvertedSoftmax):
        def serving_protocol(self):
            return self

    assert public_methods(Louder) == BIAS_FORM | {"serving_protocol"}
    assert public_methods(Louder) != allowed(Louder)


def test_every_normalizer_is_a_transformer_and_no_reranker_is():
    assert all(base_of(cls) is StandardScaler for cls in catalogue.normalizers())
    assert all(base_of(cls) is BaseEstimator for cls in catalogue.rerankers())
    assert np.all([cls in ESTIMATORS for cls in (QueryBankGate, NormalizedIndex)])
