"""The catalogue: registration, look-up, listings, and a new method in one file."""

import importlib.util
from numbers import Real

import numpy as np
import pytest
from sklearn.utils._param_validation import Interval
from sklearn.utils.estimator_checks import check_estimator

import skqbnorm.normalizers as normalizers_module
from skqbnorm import catalogue
from skqbnorm.catalogue import (
    METHODS,
    Method,
    Settings,
    get_method,
    make_normalizer,
    normalizers,
    register,
    rerankers,
    unregister,
)
from skqbnorm.cli import main
from skqbnorm.normalizers import (
    Capabilities,
    Centering,
    DualInvertedSoftmax,
    InvertedSoftmax,
    QueryBankNormalizer,
)
from skqbnorm.rerankers import BayesianReranker, KReciprocalReranker
from skqbnorm.rerankers._neighborhood import NeighborhoodReranker

from helpers import HalfMax


class ShrinkToListMean(NeighborhoodReranker):
    """A toy reranker: each initial score shrunk toward its list's mean by ``shrinkage``."""

    strength_param = "shrinkage"
    strength_grid = (0.0, 0.5)
    _parameter_constraints: dict = {**NeighborhoodReranker._parameter_constraints,
                                    "shrinkage": [Interval(Real, 0, 1, closed="both")]}

    def __init__(self, shrinkage=0.5, n_jobs=None):
        self.shrinkage = shrinkage
        self.n_jobs = n_jobs

    def _rerank_path(self, features, initial, values):
        mean = (initial / len(initial)).sum()  # no overflow near the largest float
        return [((1 - value) * initial + value * mean, {}) for value in values]


@pytest.fixture
def shrink_to_list_mean():
    """ShrinkToListMean registered as "Shrink" for the test, then removed."""
    registered = register("Shrink", ShrinkToListMean)
    try:
        yield registered
    finally:
        unregister("shrink")


@pytest.fixture
def half_max():
    """HalfMax registered as "Half-Max" for the test, then removed."""
    method = register("Half-Max", Method("HalfMax", "half the bank's largest similarity", HalfMax))
    try:
        yield method
    finally:
        unregister("half-max")


def test_a_registered_toy_passes_check_estimator(half_max):
    check_estimator(HalfMax())


def test_a_registered_toy_is_listed_and_found_in_any_case(half_max):
    assert get_method("HALF-MAX") is half_max and get_method("half-max") is half_max
    assert "half-max" in catalogue.method_names()
    assert HalfMax in normalizers() and HalfMax in normalizers(bias_form=True, index="bias")
    assert HalfMax not in normalizers(whole_rows=True)


def test_a_registered_toy_is_served_by_the_index(half_max):
    pytest.importorskip("faiss")
    from skqbnorm.index import NormalizedIndex

    rng = np.random.default_rng(0)
    bank, gallery, queries = rng.normal(size=(60, 8)), rng.normal(size=(200, 8)), rng.normal(size=(9, 8))
    toy = HalfMax().fit(bank, gallery=gallery)
    index = NormalizedIndex(toy, "Flat").fit()
    assert index.bias_form_
    indices, scores = index.search(queries, k=5)
    exact_indices, exact_scores = toy.top_k(queries=queries, k=5)
    np.testing.assert_array_equal(indices, exact_indices)
    np.testing.assert_allclose(scores, exact_scores, rtol=1e-6)
    # against a reference written here: s - max_b s(b, g) / 2, ranked
    prepared = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    unit = gallery / np.linalg.norm(gallery, axis=1, keepdims=True)
    bank_unit = bank / np.linalg.norm(bank, axis=1, keepdims=True)
    reference = prepared @ unit.T - (bank_unit @ unit.T).max(axis=0) / 2
    np.testing.assert_array_equal(indices, np.argsort(-reference, axis=1, kind="stable")[:, :5])


def test_a_registered_toy_is_a_method_of_the_command_line(half_max, tmp_path, capsys):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "sims.npy", rng.uniform(-0.2, 0.8, size=(12, 12)) + np.eye(12))
    np.save(tmp_path / "bank.npy", rng.uniform(-0.2, 0.8, size=(30, 12)))
    code = main(["evaluate", "--sims", str(tmp_path / "sims.npy"), "--bank-sims",
                 str(tmp_path / "bank.npy"), "--method", "half-max", "--bootstrap", "0"])
    assert code in (0, None)
    assert "HalfMax" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore::skqbnorm.metrics.QueryBankWarning")  # a random bank
def test_a_registered_toy_is_a_row_of_compare(half_max):
    from skqbnorm import compare

    rng = np.random.default_rng(2)
    sims = rng.uniform(-0.2, 0.8, size=(12, 12)) + np.eye(12)
    bank = rng.uniform(-0.2, 0.8, size=(30, 12))
    table = compare(sims, np.arange(12), bank_sims=bank, methods=["raw", "HALF-MAX"],
                    n_resamples=0)
    rows = table.to_dict("records") if hasattr(table, "to_dict") else table.rows
    assert [row["method"] for row in rows] == ["raw similarities", "HalfMax"]
    # its R@1 is the toy's own ranking's, written here
    scores = sims - bank.max(axis=0) / 2
    r1 = 100 * np.mean(np.argmax(scores, axis=1) == np.arange(12))
    assert rows[1]["R@1"] == pytest.approx(r1)


def test_every_normalizer_class_is_in_the_catalogue():
    """A normaliser exported but not registered would miss every list read from here."""
    exported = {getattr(normalizers_module, name) for name in normalizers_module.__all__}
    concrete = {cls for cls in exported if isinstance(getattr(cls, "capabilities", None), Capabilities)
                and cls is not QueryBankNormalizer}
    assert concrete == set(normalizers())


def test_the_rerankers_are_listed_apart():
    """Every concrete reranker skqbnorm.rerankers exports (not its base class, not the
    model selection around one) is listed, apart from the normalisers."""
    import skqbnorm.rerankers as package

    listed = rerankers()
    exported = {getattr(package, name) for name in package.__all__}
    assert set(listed) == exported - {BayesianReranker, package.RerankerCV}
    assert len(listed) == len(set(listed)) == len(catalogue.RERANKERS)
    assert not set(listed) & set(normalizers())
    assert not set(catalogue.RERANKERS) & set(METHODS)


def test_a_registered_toy_reranker_is_listed_and_removed(shrink_to_list_mean):
    assert shrink_to_list_mean is ShrinkToListMean
    assert rerankers()[-1] is ShrinkToListMean and catalogue.RERANKERS["shrink"] is ShrinkToListMean
    assert "shrink" not in METHODS
    with pytest.raises(ValueError, match="registered already; pass replace=True"):
        register("SHRINK", ShrinkToListMean)
    assert register("shrink", ShrinkToListMean, replace=True) is ShrinkToListMean
    with pytest.raises(ValueError, match="registered already as a reranker"):
        register("shrink", Method("X", "x", Centering))
    register("quarter", Method("quarter", "a quarter of the mean", Centering,
                               fixed=(("alpha", 0.25),)))
    try:
        with pytest.raises(ValueError, match="registered already as a method"):
            register("quarter", ShrinkToListMean, replace=True)
    finally:
        unregister("quarter")
    # a class registered under two names is listed once
    register("shrink-again", ShrinkToListMean)
    try:
        assert rerankers().count(ShrinkToListMean) == 1
    finally:
        assert unregister("SHRINK-AGAIN") is ShrinkToListMean
    assert "shrink-again" not in catalogue.RERANKERS


def test_a_registered_toy_reranker_passes_check_estimator(shrink_to_list_mean):
    check_estimator(ShrinkToListMean())
    # against a reference written here: (1 - s) y + s mean(y), each list apart
    y, groups = np.array([0.9, 0.1, 0.5, 0.2, 0.4]), np.array([0, 0, 0, 1, 1])
    scores = ShrinkToListMean(shrinkage=0.25).fit_predict(np.eye(5), y, groups)
    np.testing.assert_allclose(scores, [0.8, 0.2, 0.5, 0.225, 0.375])


@pytest.mark.parametrize("name", ["hinge", "K-Reciprocal", "query-expansion"])
def test_the_shipped_rerankers_cannot_be_removed_or_replaced(name):
    with pytest.raises(ValueError, match=rf"name '{name.lower()}' is a reranker skqbnorm ships"):
        unregister(name)
    with pytest.raises(ValueError, match="is a reranker skqbnorm ships; it cannot be replaced"):
        register(name, ShrinkToListMean, replace=True)
    assert catalogue.RERANKERS[name.lower()] in rerankers()


class NoGroups(ShrinkToListMean):
    def fit_predict(self, X, y):
        return self.fit(X, y).scores_


class FitTakesNoGroups(ShrinkToListMean):
    def fit(self, X, y):
        return super().fit(X, y)


class NeedsShrinkage(ShrinkToListMean):
    def __init__(self, shrinkage, n_jobs=None):
        super().__init__(shrinkage, n_jobs)


class NoFitPredict:
    def fit(self, X, y, groups=None):
        return self


@pytest.mark.parametrize(("entry", "error", "message"), [
    (NoFitPredict, TypeError, "NoFitPredict has no fit_predict or get_params"),
    (NoGroups, ValueError, "NoGroups.fit_predict takes no groups"),
    (FitTakesNoGroups, ValueError, "FitTakesNoGroups.fit takes no groups"),
    (NeedsShrinkage, ValueError, r"parameters without a default \['shrinkage'\]"),
    (InvertedSoftmax, TypeError, "catalogue.Method"),
    (KReciprocalReranker(), TypeError, "or a reranker class"),
])
def test_register_refuses_a_class_that_is_no_reranker(entry, error, message):
    with pytest.raises(error, match=message):
        register("x", entry)
    assert "x" not in catalogue.RERANKERS and "x" not in METHODS


def _fresh_catalogue():
    """A new copy of the catalogue module, its shipped entries registered anew (the
    package's own module, which the command line reads, is left alone)."""
    spec = importlib.util.spec_from_file_location("skqbnorm._catalogue_copy", catalogue.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_entries_pass_through_register(monkeypatch):
    """A shipped entry that a plug-in's checks refuse stops the import: the shipped
    tables go through register() too."""
    fresh = _fresh_catalogue()
    assert fresh.BUILT_IN == catalogue.BUILT_IN == set(METHODS) | set(catalogue.RERANKERS)
    assert list(fresh.METHODS) == list(METHODS)
    assert list(fresh.RERANKERS) == list(catalogue.RERANKERS)
    with monkeypatch.context() as patched:
        patched.setattr(InvertedSoftmax, "capabilities", None)
        with pytest.raises(TypeError, match="declares its capabilities"):
            _fresh_catalogue()
    with monkeypatch.context() as patched:
        patched.setattr(KReciprocalReranker, "fit_predict", None)
        with pytest.raises(TypeError, match="KReciprocalReranker has no fit_predict"):
            _fresh_catalogue()


@pytest.mark.parametrize(("name", "method", "message"), [
    ("raw", METHODS["raw"], "skqbnorm ships"),
    (" x", METHODS["raw"], "name must be a string of letters"),
    ("x", Method("X", "x", HalfMax, data="both banks"), "declares gallery_bank=None"),
    ("x", Method("X", "x", HalfMax, data="elsewhere"), "Method.data"),
    ("x", Method("X", "x", HalfMax, ("beta",)), "has no parameters"),
    ("x", Method("X", "x", None), "data='nothing'"),
])
def test_register_refuses_an_inconsistent_entry(name, method, message):
    with pytest.raises(ValueError, match=message):
        register(name, method)
    assert "x" not in METHODS


def test_register_refuses_a_class_without_capabilities():
    class Bare:
        pass

    with pytest.raises(TypeError, match="declares its capabilities"):
        register("bare", Method("Bare", "no capabilities", Bare))
    with pytest.raises(TypeError, match="catalogue.Method"):
        register("bare", ("Bare", "a tuple"))
    assert "bare" not in METHODS


def test_look_ups_name_what_exists():
    with pytest.raises(ValueError, match="No method named 'nope': name 'nope' is not registered"
                                         ".*raw"):
        get_method("nope")
    with pytest.raises(ValueError, match="Unknown capabilities"):
        normalizers(bias=True)


def test_the_catalogue_agrees_with_each_class():
    """Declared gallery-bank inputs and the dual-bank entries agree (what register checks)."""
    for name, method in METHODS.items():
        if method.normalizer is None:
            continue
        declared = method.normalizer.capabilities.gallery_bank
        assert (declared is not None) == (method.data == "both banks"), name
        if declared is not None:
            assert method.gallery_bank_input == declared, name


def test_a_registered_toy_enters_the_bad_input_sweep(half_max, tmp_path):
    from sweep_cases import _normalizer_cases, sweep_normalizers
    from test_sweep import outcome

    assert "HALF-MAX" in sweep_normalizers()
    cases = _normalizer_cases({"HALF-MAX": sweep_normalizers()["HALF-MAX"]})
    assert len(cases) >= 50
    problems = {case.id: outcome(case, tmp_path) for case in cases}
    assert not {name: found for name, found in problems.items() if found}


@pytest.mark.parametrize("name", ["all", " ALL", "All", "a,b", "x y", "", "-x", "tab\t", 3,
                                  None, ("is",)])
def test_register_refuses_a_name_no_method_list_selects(name):
    """"all", a comma, a space: a method list would read these otherwise."""
    with pytest.raises(ValueError, match=r"\bname\b"):
        register(name, Method("X", "x", Centering))
    assert set(METHODS) - catalogue.BUILT_IN == set()


class CapabilitiesOnly:
    capabilities = Capabilities()


@pytest.mark.parametrize(("method", "error", "message"), [
    (Method("X", "x", CapabilitiesOnly), TypeError,
     "Method.normalizer CapabilitiesOnly has no fit or transform"),
    (Method(3, "x", Centering), ValueError, "Method.label must be a non-empty string; got 3"),
    (Method(" ", "x", Centering), ValueError, "Method.label"),
    (Method("X", None, Centering), ValueError, "Method.summary"),
    (Method("X", "x", InvertedSoftmax, "beta"), ValueError,
     "Method.options must be a tuple; got options='beta'"),
    (Method("X", "x", InvertedSoftmax, (1,)), ValueError, "Method.options must be setting names"),
    (Method("X", "x", Centering, fixed=("alpha", 0.5)), ValueError,
     r"Method.fixed must be \(parameter name, value\) pairs"),
    (Method("X", "x", Centering, data="nothing"), ValueError,
     "Method.data='nothing' is for a method without a normaliser"),
    (Method("X", "x", Centering, data=["querybank"]), ValueError, "Method.data must be one of"),
    (Method("X", "x", DualInvertedSoftmax, data="both banks"), ValueError,
     "Method.single_bank must name the registered method"),
    (Method("X", "x", DualInvertedSoftmax, data="both banks", single_bank="nope"), ValueError,
     "single_bank='nope'"),
    (Method("X", "x", Centering, iterative=1), ValueError, "Method.iterative must be True or"),
    (Method("X", "x", Centering, iterative=True), ValueError, "Centering has no parameter tol"),
])
def test_register_refuses_an_entry_no_evaluation_can_run(method, error, message):
    with pytest.raises(error, match=message):
        register("x", method)
    assert "x" not in METHODS


def test_a_dual_bank_entry_with_its_single_bank_registers():
    entry = Method("X", "x", DualInvertedSoftmax, ("beta1",), data="both banks",
                   single_bank="IS")
    try:
        assert register("x", entry) is entry
    finally:
        unregister("x")


def test_the_shipped_methods_cannot_be_removed_or_replaced(half_max):
    for name in ("raw", "DIS", "is"):
        with pytest.raises(ValueError, match=rf"name '{name.lower()}' is a method skqbnorm ships"):
            unregister(name)
        with pytest.raises(ValueError, match="cannot be replaced"):
            register(name, Method("X", "x", Centering), replace=True)
    assert {"raw", "dis", "is"} <= set(METHODS) and METHODS["raw"].normalizer is None
    with pytest.raises(ValueError, match="registered already; pass replace=True"):
        register("half-max", Method("Y", "y", Centering))
    replaced = register("HALF-MAX", Method("Y", "y", Centering), replace=True)
    assert get_method("half-max") is replaced
    with pytest.raises(ValueError, match="replace must be True or False"):
        register("half-max", Method("Y", "y", Centering), replace="yes")


def test_a_method_another_needs_alone_is_not_unregistered():
    register("my-is", Method("my IS", "IS", InvertedSoftmax))
    register("my-dual", Method("my DBNorm", "DBNorm", DualInvertedSoftmax, data="both banks",
                               single_bank="MY-IS"))
    try:
        with pytest.raises(ValueError, match="'my-is' is the single_bank of my-dual"):
            unregister("my-is")
    finally:
        unregister("my-dual")
        unregister("my-is")


@pytest.mark.parametrize("capability", [
    {"index": "flat"}, {"index": ["bias"]}, {"bias_form": "yes"}, {"bias_form": 1},
    {"whole_rows": None}, {"gallery_bank": "bank"}, {"gallery_bank": True},
])
def test_normalizers_refuse_a_value_no_capability_takes(capability):
    (name, _), = capability.items()
    with pytest.raises(ValueError, match=rf"capability {name} is one of .*got {name}="):
        normalizers(**capability)


def test_normalizers_match_every_value_a_capability_takes():
    """Each class lands in exactly one list per capability, as its declaration says."""
    classes = normalizers()
    for name, values in [("index", ("bias", "rerank", None)), ("bias_form", (True, False)),
                         ("gallery_bank", (None, "gallery_bank", "querybank_to_gallery_bank"))]:
        lists = [normalizers(**{name: value}) for value in values]
        assert sorted(cls.__name__ for found in lists for cls in found) == sorted(
            cls.__name__ for cls in classes)
        for value, found in zip(values, lists):
            assert all(getattr(cls.capabilities, name) == value for cls in found)


def test_make_normalizer_takes_a_name_in_any_case():
    made = make_normalizer("IS", Settings(beta=7))
    assert type(made) is InvertedSoftmax
    assert made.get_params() == InvertedSoftmax(beta=7).get_params()
    assert make_normalizer("Raw") is None
    assert make_normalizer("DN").alpha == 0.5
    with pytest.raises(ValueError, match="No method named 'nope'"):
        make_normalizer("nope")
    with pytest.raises(ValueError, match="settings must be a catalogue.Settings"):
        make_normalizer("is", {"beta": 3})


@pytest.mark.parametrize("name", [["csls"], None, 3, ("csls",)])
def test_get_method_refuses_what_is_not_a_name(name):
    with pytest.raises(ValueError, match=r"name must be a method name \(a string\).*csls"):
        get_method(name)
    with pytest.raises(ValueError, match=r"name must be a method name"):
        unregister(name)


def test_a_registered_toy_enters_the_catalogue_sweep(half_max, tmp_path):
    from sweep_cases import catalogue_cases, catalogue_compare_cases
    from test_sweep import outcome

    cases = [case for case in catalogue_cases() + catalogue_compare_cases()
             if "half-max" in case.id]
    assert {"catalogue-get_method-half-max", "catalogue-compare-half-max-list",
            "catalogue-register-half-max-options_str"} <= {case.id for case in cases}
    problems = {case.id: outcome(case, tmp_path) for case in cases}
    assert not {name: found for name, found in problems.items() if found}
    assert get_method("half-max") is half_max


def test_registered_toys_enter_the_estimator_checks_and_the_sweep(half_max, shrink_to_list_mean):
    """Registering is all it takes: a toy normaliser and a toy reranker are enrolled in
    scikit-learn's estimator checks and in every case list of the sweep."""
    from sweep_cases import _reranker_cases, all_cases, sweep_normalizers, sweep_rerankers
    from sweep_cases_rerankers import neighborhood_reranker_cases
    from test_estimator_checks import catalogue_estimators

    checked = {type(estimator) for estimator in catalogue_estimators()}
    assert {HalfMax, ShrinkToListMean} <= checked
    assert "HALF-MAX" in sweep_normalizers()
    assert sweep_rerankers(False)["shrink"] is ShrinkToListMean
    assert "shrink" not in sweep_rerankers(True)
    ids = {case.id for case in all_cases() + neighborhood_reranker_cases()}
    assert {"normalizers-HALF-MAX-top_k-k=6", "rerankers-shrink-X-list",
            "rerankers-shrink-y-nan", "rerankers-shrink-groups-none",
            "rerankers-shrink-param-n_jobs=2.5"} <= ids
    assert not [case for case in _reranker_cases() if "shrink" in case.id]


def test_a_registered_toy_reranker_passes_the_bad_input_sweep(shrink_to_list_mean, tmp_path):
    from sweep_cases_rerankers import neighborhood_reranker_cases
    from test_sweep import outcome

    cases = neighborhood_reranker_cases({"shrink": ShrinkToListMean})
    assert len(cases) >= 50
    problems = {case.id: outcome(case, tmp_path) for case in cases}
    assert not {name: found for name, found in problems.items() if found}


def test_unregistered_toys_leave_the_lists(half_max):
    from sweep_cases import sweep_normalizers, sweep_rerankers
    from test_estimator_checks import catalogue_estimators

    register("shrink", ShrinkToListMean)
    unregister("shrink")
    assert ShrinkToListMean not in {type(estimator) for estimator in catalogue_estimators()}
    assert "shrink" not in sweep_rerankers(False)
    unregister("half-max")
    try:
        assert "HALF-MAX" not in sweep_normalizers()
    finally:
        register("half-max", half_max)
