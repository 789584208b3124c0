"""Serving a fitted normaliser: transform's output container (``set_output``)."""

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_array_equal
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._set_output import ADAPTERS_MANAGER

from skqbnorm import CSLS, DynamicInvertedSoftmax, QueryBankGate, catalogue

pytestmark = pytest.mark.filterwarnings(f"ignore::{ConvergenceWarning.__module__}.ConvergenceWarning")

N_GALLERY = 12


class Frame:
    """A stand-in for a DataFrame: the values and the column names it was given."""

    def __init__(self, values, columns):
        self.values = np.asarray(values)
        self.columns = list(columns)


class FrameAdapter:
    """An output container for ``set_output(transform="frame")``, so that the wrapping
    is tested without pandas (pandas is not a test dependency)."""

    container_lib = "frame"

    def create_container(self, X_output, X_original, columns, inplace=True):
        values = X_output.values if isinstance(X_output, Frame) else X_output
        return Frame(values, columns() if callable(columns) else columns)

    def is_supported_container(self, X):
        return isinstance(X, Frame)

    def rename_columns(self, X, columns):
        X.columns = list(columns)
        return X

    def hstack(self, Xs):
        raise NotImplementedError


@pytest.fixture
def frame_output(monkeypatch):
    monkeypatch.setitem(ADAPTERS_MANAGER.adapters, "frame", FrameAdapter())


def fitted(cls, rng):
    bank = rng.normal(size=(40, N_GALLERY))
    return cls().fit(bank)


NAMES = [f"x{i}" for i in range(N_GALLERY)]


@pytest.mark.parametrize("cls", catalogue.normalizers(), ids=lambda c: c.__name__)
def test_set_output_wraps_transform(cls, rng, frame_output):
    normalizer = fitted(cls, rng)
    queries = rng.normal(size=(5, N_GALLERY))
    plain = normalizer.transform(queries)
    normalizer.set_output(transform="frame")
    wrapped = normalizer.transform(queries)
    assert isinstance(wrapped, Frame)
    assert wrapped.columns == NAMES == list(normalizer.get_feature_names_out())
    assert_array_equal(wrapped.values, plain)
    # fit_transform, which was wrapped already, names the columns the same way
    assert normalizer.fit_transform(rng.normal(size=(40, N_GALLERY))).columns == NAMES
    normalizer.set_output(transform="default")
    assert isinstance(normalizer.transform(queries), np.ndarray)


def test_config_context_wraps_transform(rng, frame_output):
    normalizer = fitted(DynamicInvertedSoftmax, rng)
    queries = rng.normal(size=(5, N_GALLERY))
    with sklearn.config_context(transform_output="frame"):
        wrapped = normalizer.transform(queries)
    assert isinstance(wrapped, Frame) and wrapped.columns == NAMES
    assert_array_equal(wrapped.values, normalizer.transform(queries))


def test_set_output_names_gallery_items_in_embedding_mode(rng, frame_output):
    gallery = rng.normal(size=(N_GALLERY, 4))
    normalizer = CSLS(k=3).fit(rng.normal(size=(40, 4)), gallery=gallery)
    normalizer.set_output(transform="frame")
    wrapped = normalizer.transform(normalizer.similarities(rng.normal(size=(3, 4))))
    assert wrapped.columns == NAMES and wrapped.values.shape == (3, N_GALLERY)


@pytest.mark.filterwarnings("ignore::skqbnorm.metrics.QueryBankWarning")
@pytest.mark.parametrize("shift", [0.0, 5.0], ids=["open", "closed"])
def test_set_output_wraps_the_gate(rng, frame_output, shift):
    bank = rng.normal(size=(40, N_GALLERY))
    # queries from the bank's distribution leave the gate open; shifted ones close it
    queries = rng.normal(size=(30, N_GALLERY)) + shift
    gate = QueryBankGate(CSLS(k=3)).fit(bank, queries=queries)
    assert gate.open_ is (shift == 0.0)
    plain = gate.transform(queries)
    assert list(gate.get_feature_names_out()) == NAMES
    gate.set_output(transform="frame")
    wrapped = gate.transform(queries)
    assert isinstance(wrapped, Frame) and wrapped.columns == NAMES
    assert_array_equal(wrapped.values, plain)
    gate.set_output(transform="default")
    with sklearn.config_context(transform_output="frame"):
        assert gate.transform(queries).columns == NAMES


def test_pandas_output_names_the_gallery_columns(rng):
    pandas = pytest.importorskip("pandas")
    names = [f"item{i}" for i in range(N_GALLERY)]
    bank = pandas.DataFrame(rng.normal(size=(40, N_GALLERY)), columns=names)
    queries = pandas.DataFrame(rng.normal(size=(5, N_GALLERY)), columns=names, index=list("abcde"))
    normalizer = DynamicInvertedSoftmax().set_output(transform="pandas").fit(bank)
    scores = normalizer.transform(queries)
    assert isinstance(scores, pandas.DataFrame)
    assert list(scores.columns) == names and list(scores.index) == list("abcde")
    assert list(normalizer.fit_transform(bank).columns) == names
