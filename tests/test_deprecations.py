"""The names respelt in 1.0 (American spelling, one name per meaning): each old name still
works until 1.1, gives what the new one gives, and warns with a FutureWarning naming both."""

import importlib
import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import skqbnorm
from skqbnorm import Centering, DynamicInvertedSoftmax, PointwiseReranker
from skqbnorm.metrics import (
    average_precision,
    average_precisions,
    make_map_scorer,
    mean_average_precision,
)


@pytest.mark.parametrize(("module", "old", "new"), [
    ("skqbnorm", "SinkhornNormalisation", "SinkhornNormalization"),
    ("skqbnorm", "DualBankSinkhornNormalisation", "DualBankSinkhornNormalization"),
    ("skqbnorm.normalizers", "QueryBankNormaliser", "QueryBankNormalizer"),
    ("skqbnorm.normalizers", "SinkhornNormalisation", "SinkhornNormalization"),
    ("skqbnorm.index", "NormalisedIndex", "NormalizedIndex"),
    ("skqbnorm.catalogue", "normalisers", "normalizers"),
    ("skqbnorm.catalogue", "make_normaliser", "make_normalizer"),
])
def test_an_old_name_is_the_new_object_and_warns(module, old, new):
    if module == "skqbnorm.index":
        pytest.importorskip("faiss")
    namespace = importlib.import_module(module)
    with pytest.warns(FutureWarning, match=rf"{module}\.{old} was renamed {new} in skqbnorm 1\.0"):
        found = getattr(namespace, old)
    assert found is getattr(namespace, new)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'skqbnorm' has no attribute 'Nothing'"):
        skqbnorm.Nothing  # noqa: B018


def test_the_old_subpackage_warns_and_serves_the_new_one(monkeypatch):
    monkeypatch.delitem(sys.modules, "skqbnorm.normalisers", raising=False)
    with pytest.warns(FutureWarning, match="skqbnorm.normalisers was renamed skqbnorm.normalizers"):
        old = importlib.import_module("skqbnorm.normalisers")
    assert old.InvertedSoftmax is skqbnorm.InvertedSoftmax
    with pytest.warns(FutureWarning, match="QueryBankNormaliser was renamed"):
        assert old.QueryBankNormaliser is skqbnorm.normalizers.QueryBankNormalizer


def test_normalised_rows_warns_and_equals_normalized_rows(rng):
    dis = DynamicInvertedSoftmax(beta=5.0, k=1).fit(rng.normal(size=(20, 8)),
                                                     gallery=rng.normal(size=(6, 8)))
    top1 = np.array([0, 3, 5, 2])
    with pytest.warns(FutureWarning, match="normalised_rows was renamed normalized_rows"):
        old = dis.normalised_rows(top1)
    assert_array_equal(old, dis.normalized_rows(top1))


def test_centering_weight_is_alpha_and_warns(rng):
    bank, queries = rng.normal(size=(30, 7)), rng.normal(size=(5, 7))
    with pytest.warns(FutureWarning, match="Centering's weight was renamed alpha"):
        old = Centering(weight=0.5).fit(bank).transform(queries)
    assert_array_equal(old, Centering(alpha=0.5).fit(bank).transform(queries))
    assert Centering(0.5).get_params()["alpha"] == 0.5  # positional use is unchanged


@pytest.mark.parametrize("metric", [average_precision, average_precisions, mean_average_precision])
def test_ap_normaliser_is_denominator_and_warns(metric):
    scores, relevance = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0, 1, 1, 0, 1, 0]
    args = (scores, relevance) if metric is average_precision else (scores, relevance, [0] * 6)
    with pytest.warns(FutureWarning, match="normaliser was renamed denominator"):
        old = metric(*args, n=2, normaliser="truncated")
    new = metric(*args, n=2, denominator="truncated")
    assert_array_equal(old, new)
    assert not np.array_equal(new, metric(*args, n=2))  # the option matters here


def test_map_scorer_normaliser_is_denominator_and_warns():
    with pytest.warns(FutureWarning, match="normaliser was renamed denominator"):
        scorer = make_map_scorer(n=3, normaliser="truncated")
    assert scorer.denominator == "truncated" and scorer.n == 3


@pytest.mark.parametrize(("old", "new"), [("normalised", "normalized"),
                                          ("unnormalised", "unnormalized")])
def test_laplacian_old_spellings_warn_and_rank_alike(rng, old, new):
    features, initial = rng.normal(size=(40, 3)), rng.normal(size=40)
    with pytest.warns(FutureWarning, match=rf"laplacian='{old}' is spelt '{new}' since"):
        before = PointwiseReranker(laplacian=old).fit_predict(features, initial)
    assert_array_equal(before, PointwiseReranker(laplacian=new).fit_predict(features, initial))


def test_renamed_fitted_attributes_warn_and_equal_the_new_ones(rng):
    from skqbnorm import CSLS, NearestNeighborNormalization
    from skqbnorm.metrics import querybank_diagnostics

    bank = rng.normal(size=(30, 9))
    for normalizer in (CSLS(k=3), NearestNeighborNormalization(k=3)):
        assert not hasattr(normalizer, "bank_neighbourhood_")  # unfitted: absent, as before
        normalizer.fit(bank)
        with pytest.warns(FutureWarning, match="bank_neighbourhood_ was renamed bank_neighborhood_"):
            old = normalizer.bank_neighbourhood_
        assert old is normalizer.bank_neighborhood_
    report = querybank_diagnostics(bank, rng.normal(size=(10, 9)))
    with pytest.warns(FutureWarning, match="neighbour_gap was renamed neighbor_gap"):
        assert report.neighbour_gap == report.neighbor_gap
