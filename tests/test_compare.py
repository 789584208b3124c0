"""skqbnorm.compare: the Python form of ``skqbnorm evaluate``, the same rows."""

import csv
import io
import json
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skqbnorm import CSLS, Centering, DualInvertedSoftmax, InvertedSoftmax, compare
from skqbnorm import DualBankSinkhornNormalization as DBSN
from skqbnorm._compare import TABLE_COLUMNS, ComparisonTable
from skqbnorm.catalogue import METHODS, Method
from skqbnorm.cli import main
from skqbnorm.datasets import make_hubness_sims
from skqbnorm.metrics import QueryBankDiagnostics, paired_comparison, retrieval_metrics


@pytest.fixture(scope="module")
def data():
    sims, gt, bank = make_hubness_sims(60, 40, 80, random_state=0)
    gallery_bank = np.random.default_rng(3).normal(size=(30, 40))
    return sims, gt, bank, gallery_bank


def table(*args, **kwargs):
    return compare(*args, as_frame=False, **kwargs)


def test_compare_gives_the_rows_of_skqbnorm_evaluate(data, tmp_path, capsys):
    sims, gt, bank, gallery_bank = data
    for name, array in {"sims": sims, "bank": bank, "gt": gt, "gb": gallery_bank}.items():
        np.save(tmp_path / f"{name}.npy", array)
    assert main(["evaluate", "--sims", str(tmp_path / "sims.npy"), "--bank-sims",
                 str(tmp_path / "bank.npy"), "--gt", str(tmp_path / "gt.npy"),
                 "--gallery-bank-sims", str(tmp_path / "gb.npy"), "--method", "is,csls,dbnorm",
                 "--k", "3", "--format", "json", "--quiet", "--bootstrap", "200",
                 "--seed", "7"]) == 0
    by_cli = json.loads(capsys.readouterr().out)
    result = table(sims, gt, bank_sims=bank, gallery_bank=gallery_bank,
                   methods=["IS", "csls", "DBNorm"], params={"k": 3}, n_resamples=200,
                   random_state=7)
    assert len(result) == len(by_cli) == 4
    for ours, theirs in zip(result.rows, by_cli):
        assert {key: value for key, value in ours.items() if key != "seconds"} == {
            key: value for key, value in theirs.items() if key != "seconds"}


def test_each_row_is_its_class_and_its_paired_comparison(data):
    sims, gt, bank, _ = data
    result = table(sims, gt, bank_sims=bank, methods="is,csls", params={"k": 3, "beta": 30},
                   n_resamples=300, random_state=2, confidence=0.9)
    assert result["method"] == ["raw similarities", "IS (beta=30)", "CSLS (k=3)"]
    for row, normalizer in zip(result.rows[1:], (InvertedSoftmax(beta=30), CSLS(k=3))):
        scores = normalizer.fit(bank).transform(sims)
        assert row["MnR"] == pytest.approx(retrieval_metrics(scores, gt)["MnR"], rel=1e-11)
        expected = paired_comparison(sims, scores, gt, n_resamples=300, random_state=2,
                                     confidence=0.9)
        assert (row["R@1 change low"], row["R@1 change high"]) == pytest.approx(
            expected.interval["R@1"], rel=1e-11)
        assert row["mAP change"] == pytest.approx(expected.change["mAP"], rel=1e-11)
    assert all(result.rows[0][field] is None for field in TABLE_COLUMNS[8:])


def test_values_are_rounded_to_twelve_significant_digits(data):
    sims, gt, bank, _ = data
    result = table(sims, gt, bank_sims=bank, methods="is", n_resamples=0)
    for row in result.rows:
        for column in ("R@1", "R@5", "MnR", "skewness"):
            assert row[column] == float(f"{row[column]:.12g}")
    text = result.to_csv()
    assert all(len(cell) <= 19 for line in csv.reader(io.StringIO(text)) for cell in line[1:])
    assert list(csv.DictReader(io.StringIO(text)))[1]["method"] == "IS (beta=20)"
    assert "R@1 change" in str(result) and "<table>" in result._repr_html_()
    assert str(result).splitlines()[1].split()[2] == f"{result.rows[0]['R@1']:.1f}"


def test_under_all_what_cannot_run_is_named_in_attrs(data):
    sims, gt, bank, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = table(sims, gt, bank_sims=bank, n_resamples=0)
    labels = [row["method"].split(" (")[0] for row in result.rows]
    assert "DBNorm" not in labels and "DBSN" not in labels
    skipped = result.attrs["skipped"]
    assert set(skipped) == {"DBNorm (beta1=20, beta2=1)",
                            "DBNorm (dynamic; beta1=20, beta2=1, k=1)",
                            f"DBSN (tau={DBSN().tau:g}, n_iter={DBSN().n_iter})"}
    assert "it needs gallery_bank" in skipped["DBNorm (beta1=20, beta2=1)"]
    assert isinstance(result.attrs["querybank_diagnostics"], QueryBankDiagnostics)
    assert len(result) == len(METHODS) - 3


def test_without_a_bank_only_the_bankless_methods_run(data):
    sims, gt, _, _ = data
    result = table(sims, gt, n_resamples=0)
    assert [row["method"].split(" (")[0] for row in result.rows] == ["raw similarities", "DSL"]
    assert result.attrs["querybank_diagnostics"] is None
    with pytest.raises(ValueError, match="IS is fitted on a querybank: give bank_sims"):
        table(sims, gt, methods="is")


def test_the_dual_bank_rows_use_the_gallery_bank(data):
    sims, gt, bank, gallery_bank = data
    result = table(sims, gt, bank_sims=bank, gallery_bank=gallery_bank, methods="dbnorm",
                   n_resamples=0)
    scores = DualInvertedSoftmax().fit(bank, gallery_bank=gallery_bank).transform(sims)
    assert result.rows[1]["MnR"] == pytest.approx(retrieval_metrics(scores, gt)["MnR"])


@pytest.mark.parametrize("kwargs, error, message", [
    ({"methods": "magic"}, ValueError, "methods: invalid choice: 'magic'"),
    ({"methods": "all,is"}, ValueError, "'all' cannot be combined"),
    ({"methods": ["is", 3]}, ValueError, "methods must be 'all' or method names"),
    ({"methods": None}, ValueError, "methods must be 'all' or method names.*got methods=None"),
    ({"methods": 3}, ValueError, "methods must be 'all' or method names.*got methods=3"),
    ({"methods": b"is"}, ValueError, "methods must be 'all' or method names"),
    ({"methods": {"is": 1}}, ValueError, "methods must be 'all' or method names"),
    ({"methods": []}, ValueError, "methods must be 'all' or method names"),
    ({"methods": ["all", "is"]}, ValueError, "'all' cannot be combined"),
    ({"params": "beta=3"}, ValueError, r"params must be a dict .*got params='beta=3'"),
    ({"params": [("beta", 3)]}, ValueError, r"params must be a dict"),
    ({"params": {1: 3, "beta": 2}}, ValueError, r"params\['1'\] is not a setting of any method"),
    ({"methods": "dbnorm"}, ValueError, "methods dbnorm: DBNorm .* needs gallery_bank"),
    ({"gallery_bank": np.ones((5, 40)), "methods": "is"}, ValueError,
     r"gallery_bank is not used by methods is; it is used by dbnorm, dbnorm-dynamic"),
    ({"params": {"k": 3}, "methods": "is"}, ValueError,
     r"params\['k'\] 3 is not a setting of methods is; it sets dis"),
    ({"params": {"gamma": 3}}, ValueError, r"params\['gamma'\] is not a setting of any method"),
    ({"params": {"beta": "hot"}}, TypeError, r"params\['beta'\] must be a real number"),
    ({"params": {"k": 1000}, "methods": "csls"}, ValueError, "CSLS \\(k=1000\\): k=1000 is larger"),
    ({"bank_sims": np.ones((5, 39))}, ValueError,
     r"query_sims has shape \(60, 40\) and bank_sims has shape \(5, 39\)"),
    ({"n_resamples": -1}, ValueError, "n_resamples must be >= 0"),
    ({"confidence": 1.5}, ValueError, r"confidence must be in \(0, 1\)"),
    ({"as_frame": "yes"}, ValueError, "as_frame must be None, True or False"),
])
def test_bad_arguments_are_named(data, kwargs, error, message):
    sims, gt, bank, _ = data
    with pytest.raises(error, match=message):
        compare(sims, gt, **{"bank_sims": bank, "as_frame": False, **kwargs})


def test_a_diagonal_gt_is_assumed_and_near_chance_warned(data):
    rng = np.random.default_rng(0)
    sims, bank = rng.normal(size=(50, 50)) + 3 * np.eye(50), rng.normal(size=(70, 50))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*near chance")
        assumed = table(sims, bank_sims=bank, methods="is", n_resamples=0)
    given = table(sims, np.arange(50), bank_sims=bank, methods="is", n_resamples=0)
    assert assumed["MnR"] == given["MnR"] and assumed["R@1 change"] == given["R@1 change"]
    with pytest.warns(UserWarning, match=r"raw R@1 is .*near chance \(2% for 50 gallery items"
                                         r"\).* may be shuffled"):
        table(sims[:, rng.permutation(50)], bank_sims=bank, methods="is", n_resamples=0)
    with pytest.raises(ValueError, match=r"query_sims has shape \(50, 49\), not square: give gt"):
        table(sims[:, :49], bank_sims=bank[:, :49], methods="is")


def test_a_registered_method_takes_part(data, monkeypatch):
    sims, gt, bank, _ = data
    monkeypatch.setitem(METHODS, "is-sharp", METHODS["is"]._replace(
        label="sharp IS", fixed=(("beta", 50.0),), options=()))
    result = table(sims, gt, bank_sims=bank, methods="IS-SHARP", n_resamples=0)
    scores = InvertedSoftmax(beta=50).fit(bank).transform(sims)
    assert result.rows[1]["method"] == "sharp IS"
    assert result.rows[1]["MnR"] == pytest.approx(retrieval_metrics(scores, gt)["MnR"])


def test_a_convergence_warning_names_the_method(data):
    sims, gt, bank, _ = data
    with pytest.warns(ConvergenceWarning, match=r"^SN \(tau=0.01, n_iter=1\): did not converge "
                                                r".* A larger n_iter or tau"):
        table(sims, gt, bank_sims=bank, methods="sn", params={"tau": 0.01, "n_iter": 1},
              n_resamples=0)


def test_the_table_writes_csv_to_a_file_and_a_frame(data, tmp_path):
    sims, gt, bank, _ = data
    result = table(sims, gt, bank_sims=bank, methods="is", n_resamples=50)
    result.to_csv(tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text() == result.to_csv()
    buffer = io.StringIO()
    assert result.to_csv(buffer) is None and buffer.getvalue() == result.to_csv()
    assert isinstance(result, ComparisonTable) and result.columns == TABLE_COLUMNS
    with pytest.raises(KeyError):
        result["no such column"]
    pandas = pytest.importorskip("pandas")
    frame = compare(sims, gt, bank_sims=bank, methods="is", n_resamples=50)
    assert isinstance(frame, pandas.DataFrame) and list(frame.columns) == list(TABLE_COLUMNS)
    assert frame["R@1"].tolist() == result["R@1"]
    assert frame.attrs["skipped"] == {}


@pytest.mark.filterwarnings("ignore::skqbnorm.metrics.QueryBankWarning")
@pytest.mark.parametrize("methods", [["all"], ("ALL ",), "All"])
def test_all_in_a_list_is_all(data, methods):
    sims, gt, bank, _ = data
    spelled = table(sims, gt, bank_sims=bank, methods=methods, n_resamples=0)
    plain = table(sims, gt, bank_sims=bank, methods="all", n_resamples=0)
    assert spelled["method"] == plain["method"] and spelled["MnR"] == plain["MnR"]
    assert spelled.attrs["skipped"] == plain.attrs["skipped"]
    assert "dbnorm" not in " ".join(spelled["method"]).lower()  # skipped: no gallery bank


class Spoiled(Centering):
    """Centering whose scores a test spoils as ``spoil`` says."""

    spoil = None

    def transform(self, X):
        return type(self).spoil(super().transform(X))


@pytest.mark.parametrize(("spoil", "message"), [
    (lambda s: np.where(np.arange(s.shape[1]) == 3, np.nan, s),
     (r"methods spoiled: spoiled returned 60 non-finite scores from finite similarities "
      r"\(the first, nan, at query 0, gallery item 3\)")),
    (lambda s: np.where(s > 0, np.inf, s), "methods spoiled: spoiled returned .* non-finite"),
    (lambda s: s[:, :-1], (r"methods spoiled: spoiled returned scores of shape \(60, 39\); "
                           r".* shape \(60, 40\)")),
    (lambda s: s[:-1], r"returned scores of shape \(59, 40\)"),
    (lambda s: None, r"returned scores of shape \(\)"),
    (lambda s: s.astype(object), "returned scores of dtype object"),
    (lambda s: s + 0j, "returned scores of dtype complex128"),
    (lambda s: [row[: i + 1] for i, row in enumerate(s)], "returned scores that are no array"),
])
def test_a_method_returning_unrankable_scores_is_named(data, monkeypatch, spoil, message):
    """The error names the method that spoiled its scores, not the similarities it got."""
    sims, gt, bank, _ = data
    monkeypatch.setattr(Spoiled, "spoil", staticmethod(spoil))
    monkeypatch.setitem(METHODS, "spoiled", Method("spoiled", "spoiled", Spoiled))
    with pytest.raises(ValueError, match=message) as caught:
        table(sims, gt, bank_sims=bank, methods="spoiled", n_resamples=0)
    assert "sims" not in str(caught.value) and " gt" not in str(caught.value)


def test_a_method_returning_a_list_of_rows_is_ranked(data, monkeypatch):
    sims, gt, bank, _ = data
    monkeypatch.setattr(Spoiled, "spoil", staticmethod(lambda s: s.tolist()))
    monkeypatch.setitem(METHODS, "listed", Method("listed", "as lists", Spoiled))
    result = table(sims, gt, bank_sims=bank, methods="listed,cent", n_resamples=0)
    assert result.rows[1]["MnR"] == result.rows[2]["MnR"]
