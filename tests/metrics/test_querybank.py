"""querybank_diagnostics: figures against dense references, warnings on the bundled banks."""

import json
import warnings

import numpy as np
import pytest

from skqbnorm import DualDynamicInvertedSoftmax, DynamicInvertedSoftmax
from skqbnorm.datasets import load_wordnet_revdict
from skqbnorm.metrics import QueryBankDiagnostics, QueryBankWarning, querybank_diagnostics

from helpers import strong_model_task


def unit_rows(values):
    return values / np.linalg.norm(values, axis=1, keepdims=True)


def ecdf_gap(a, b):
    """KS distance and W1 distance of two samples, from their empirical CDFs on the pooled grid."""
    grid = np.sort(np.concatenate([a, b]))
    cdf_a = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    cdf_b = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    gap = np.abs(cdf_a - cdf_b)
    return gap.max(), np.sum(gap[:-1] * np.diff(grid))


def dense_reference(bank_sims, query_sims, k, gallery_bank_sims=None, depth=10):
    """The coverage, top-1 and depth figures, from whole matrices and full sorts."""
    n_gallery = bank_sims.shape[1]
    depth = min(depth, n_gallery)
    query_deep = -np.sort(-query_sims, axis=1)[:, depth - 1]
    # The bank's depth-th or (depth - 1)-th, whichever is nearer to the queries'.
    distances = {rank: ecdf_gap(-np.sort(-bank_sims, axis=1)[:, rank - 1], query_deep)[0]
                 for rank in (depth - 1, depth)}
    bank_depth = min(distances, key=distances.get)
    activated = np.zeros(n_gallery, dtype=bool)
    activated[np.argsort(-bank_sims, axis=1)[:, :k].ravel()] = True
    query_item = np.argmax(query_sims, axis=1)
    ks, w1 = ecdf_gap(bank_sims.max(axis=1), query_sims.max(axis=1))
    figures = {
        "gallery_coverage": activated.mean(),
        "activation_diversity": activated.sum() / min(k * len(bank_sims), n_gallery),
        "dis_share": activated[query_item].mean(),
        "bank_top1_median": np.median(bank_sims.max(axis=1)),
        "query_top1_median": np.median(query_sims.max(axis=1)),
        "top1_ks": ks,
        "top1_wasserstein": w1,
        "bank_depth": bank_depth,
        "bank_depth_median": np.median(-np.sort(-bank_sims, axis=1)[:, bank_depth - 1]),
        "query_depth_median": np.median(query_deep),
        "depth_ks": distances[bank_depth],
    }
    if gallery_bank_sims is not None:
        second = np.zeros(n_gallery, dtype=bool)
        second[np.argsort(-gallery_bank_sims, axis=1)[:, :k].ravel()] = True
        figures["gallery_bank_coverage"] = second.mean()
        figures["dual_dis_share"] = (activated[query_item] | second[query_item]).mean()
    return figures


def neighbor_reference(bank, queries):
    """Nearest-bank similarities of queries, and the bank's own (diagonal excluded)."""
    bank, queries = unit_rows(bank), unit_rows(queries)
    nearest = (queries @ bank.T).max(axis=1)
    within = bank @ bank.T
    np.fill_diagonal(within, -np.inf)
    reference = within.max(axis=1)
    return {
        "query_bank_nn_median": np.median(nearest),
        "bank_nn_median": np.median(reference),
        "nn_outlier_share": np.mean(nearest < np.quantile(reference, 0.05)),
    }


def assert_figures(report, expected):
    for name, value in expected.items():
        assert getattr(report, name) == pytest.approx(value, rel=1e-9, abs=1e-12), name


@pytest.fixture
def embeddings():
    rng = np.random.default_rng(0)
    return {
        "gallery": rng.normal(size=(40, 8)),
        "bank": rng.normal(size=(60, 8)),
        "queries": rng.normal(size=(30, 8)) + 0.5,
        "gallery_bank": rng.normal(size=(25, 8)),
    }


@pytest.mark.parametrize("k", [1, 3])
def test_similarity_figures_equal_a_dense_reference(embeddings, k):
    gallery = unit_rows(embeddings["gallery"])
    bank_sims = unit_rows(embeddings["bank"]) @ gallery.T
    query_sims = unit_rows(embeddings["queries"]) @ gallery.T
    gallery_bank_sims = unit_rows(embeddings["gallery_bank"]) @ gallery.T
    report = querybank_diagnostics(bank_sims, query_sims, gallery_bank=gallery_bank_sims, k=k,
                                   warn=False)
    assert_figures(report, dense_reference(bank_sims, query_sims, k, gallery_bank_sims))
    assert (report.n_bank, report.n_queries, report.n_gallery, report.k) == (60, 30, 40, k)
    assert report.nn_outlier_share is None and report.query_bank_nn_median is None


def test_embedding_figures_equal_a_dense_reference(embeddings):
    report = querybank_diagnostics(embeddings["bank"], embeddings["queries"],
                                   gallery=embeddings["gallery"],
                                   gallery_bank=embeddings["gallery_bank"], warn=False)
    gallery = unit_rows(embeddings["gallery"])
    sims = {name: unit_rows(embeddings[name]) @ gallery.T
            for name in ("bank", "queries", "gallery_bank")}
    expected = dense_reference(sims["bank"], sims["queries"], 1, sims["gallery_bank"])
    assert_figures(report, {**expected, **neighbor_reference(embeddings["bank"],
                                                              embeddings["queries"])})


@pytest.mark.parametrize("depth", [2, 4, 40, 100])
def test_depth_figures_equal_a_dense_reference(embeddings, depth):
    gallery = unit_rows(embeddings["gallery"])
    bank_sims = unit_rows(embeddings["bank"]) @ gallery.T
    query_sims = unit_rows(embeddings["queries"]) @ gallery.T
    report = querybank_diagnostics(bank_sims, query_sims, depth=depth, warn=False)
    assert report.depth == min(depth, 40)  # at most the gallery's 40 items
    assert_figures(report, dense_reference(bank_sims, query_sims, 1, depth=depth))


@pytest.mark.parametrize("dtype, largest", [(np.float64, 0.99 * np.finfo(np.float64).max),
                                            (np.float64, 1e-300),
                                            (np.float32, 0.99 * np.finfo(np.float32).max)])
def test_similarities_near_the_float_limits_give_the_scaled_figures(embeddings, dtype, largest):
    # every figure scales with the similarities, so the figures near the largest float are
    # those of the similarities times the scale (not inf: a median of two values near it
    # is not their sum over 2)
    gallery = unit_rows(embeddings["gallery"])
    bank_sims = 0.5 + 0.5 * unit_rows(embeddings["bank"]) @ gallery.T
    query_sims = 0.5 + 0.5 * unit_rows(embeddings["queries"]) @ gallery.T
    top = max(bank_sims.max(), query_sims.max())
    bank_sims, query_sims, scale = bank_sims / top, query_sims / top, float(largest)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow leaks either
        scaled = querybank_diagnostics((bank_sims * scale).astype(dtype),
                                       (query_sims * scale).astype(dtype), warn=False)
    plain = querybank_diagnostics(bank_sims, query_sims, warn=False)
    for name in ("bank_top1_median", "query_top1_median", "top1_wasserstein", "bank_depth_median",
                 "query_depth_median"):
        assert np.isfinite(getattr(scaled, name)), name
        assert getattr(scaled, name) == pytest.approx(getattr(plain, name) * scale, rel=1e-6), name
    assert (scaled.top1_ks, scaled.depth_ks) == (plain.top1_ks, plain.depth_ks)


def test_a_distance_beyond_float64_is_refused_by_name():
    bank = np.full((6, 4), -1.7e308)
    bank[:, 0] = 1.7e308
    queries = np.full((5, 4), -1.7e308)  # top-1 1.7e308 apart: W1 beyond float64
    with pytest.raises(ValueError, match=r"bank and queries are too far apart for float64: the "
                                         r"Wasserstein distance of their top-1 similarities"):
        querybank_diagnostics(bank, queries, warn=False)


def test_a_strong_models_in_domain_bank_is_in_domain():
    # The test queries' top-1 is their answer, far above the bank queries' top-1, whose
    # answers are not in the gallery: the top-1 distributions differ by construction.
    # Ten items down (nine for the bank, which lacks the answers) both see the same
    # neighbourhood.
    bank, queries, gallery = strong_model_task()
    report = querybank_diagnostics(bank, queries, gallery=gallery, warn=False)
    assert report.top1_ks > 0.9 and report.top1_ks_pvalue < 1e-10
    assert report.depth_ks < 0.1 and report.bank_depth == 9 and not report.depth_gap
    assert not report.out_of_domain and not report.warnings


def test_a_bank_with_its_answers_in_the_gallery_is_in_domain():
    # Served queries as the bank: every bank query has its answer in the gallery too.
    _bank, queries, gallery = strong_model_task()
    noise = np.random.default_rng(1).normal(size=gallery.shape) / np.sqrt(gallery.shape[1])
    served = gallery + 0.25 * noise  # other queries of the same gallery items
    report = querybank_diagnostics(served, queries, gallery=gallery, warn=False)
    assert report.top1_ks < 0.1 and report.depth_ks < 0.1 and report.bank_depth == 10
    assert not report.out_of_domain


def test_a_shifted_query_domain_is_out_of_domain():
    bank, queries, gallery = strong_model_task(shift=4.0)
    report = querybank_diagnostics(bank, queries, gallery=gallery, warn=False)
    assert report.depth_ks > 0.5 and report.depth_gap and report.out_of_domain


@pytest.mark.parametrize("shift", [0.0, 4.0])
def test_thresholds_are_parameters(shift):
    bank, queries, gallery = strong_model_task(n_gallery=100, n_dims=16, shift=shift)
    report = querybank_diagnostics(bank, queries, gallery=gallery, warn=False)
    for max_ks in (report.depth_ks * 0.99, report.depth_ks):
        strict = querybank_diagnostics(bank, queries, gallery=gallery, max_ks=max_ks, warn=False)
        assert strict.max_ks == max_ks
        assert strict.depth_gap == (report.depth_ks > max_ks and report.depth_ks_pvalue < 0.01)
    for share in (report.nn_outlier_share * 0.99, report.nn_outlier_share):
        strict = querybank_diagnostics(bank, queries, gallery=gallery, max_outlier_share=share,
                                       warn=False)
        assert strict.neighbor_gap == (report.nn_outlier_share > share)


def test_figures_do_not_depend_on_the_block_size(embeddings):
    whole, tiny = (querybank_diagnostics(embeddings["bank"], embeddings["queries"],
                                         gallery=embeddings["gallery"], working_memory=memory,
                                         warn=False) for memory in (None, 1e-4))
    assert whole == tiny


def test_figures_written_out_by_hand():
    # Bank top-1 items: 0, 0, 2 (activation set {0, 2}); query top-1 items: 1, 0, 2, 2.
    bank = np.array([[0.9, 0.1, 0.0], [0.6, 0.5, 0.1], [0.2, 0.3, 0.7]])
    queries = np.array([[0.1, 0.8, 0.0], [0.4, 0.3, 0.2], [0.0, 0.1, 0.5], [0.1, 0.2, 0.3]])
    report = querybank_diagnostics(bank, queries, warn=False)
    assert report.gallery_coverage == pytest.approx(2 / 3)
    assert report.activation_diversity == pytest.approx(2 / 3)
    assert report.dis_share == 0.75
    # Top-1s: bank {0.6, 0.7, 0.9}, queries {0.3, 0.4, 0.5, 0.8}. The CDFs differ most
    # between 0.5 and 0.6 (0 against 3/4); W1 is the area between them.
    assert report.top1_ks == pytest.approx(0.75)
    w1 = 0.1 * (1 / 4 + 2 / 4 + 3 / 4 + (3 / 4 - 1 / 3) + (3 / 4 - 2 / 3) + (1 - 2 / 3))
    assert report.top1_wasserstein == pytest.approx(w1)
    assert (report.bank_top1_median, report.query_top1_median) == pytest.approx((0.7, 0.45))
    with_two = querybank_diagnostics(bank, queries, k=2, warn=False)
    assert with_two.gallery_coverage == 1.0 and with_two.dis_share == 1.0
    assert with_two.activation_diversity == 1.0  # 3 items of at most min(2 * 3, 3)


def test_result_prints_and_converts(embeddings):
    report = querybank_diagnostics(embeddings["bank"], embeddings["queries"],
                                   gallery=embeddings["gallery"], warn=False)
    figures = report.to_dict()
    assert figures["dis_share"] == report.dis_share
    verdicts = {name: figures.pop(name) for name in ("covers_little", "out_of_domain")}
    assert verdicts == {"covers_little": report.covers_little,
                        "out_of_domain": report.out_of_domain}
    assert QueryBankDiagnostics(**{**figures, "warnings": tuple(figures["warnings"])}) == report
    json.dumps(figures)
    text = str(report)
    assert f"queries DIS would normalise: {report.dis_share:.1%}" in text
    assert f"KS distance {report.top1_ks:.3f}" in text


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_inputs_are_left_unchanged(embeddings, metric):
    copies = {name: array.copy() for name, array in embeddings.items()}
    querybank_diagnostics(embeddings["bank"], embeddings["queries"],
                          gallery=embeddings["gallery"],
                          gallery_bank=embeddings["gallery_bank"], metric=metric, warn=False)
    for name, array in embeddings.items():
        np.testing.assert_array_equal(array, copies[name])


def test_a_single_bank_query_has_no_neighbor_figures(embeddings):
    report = querybank_diagnostics(embeddings["bank"][:1], embeddings["queries"],
                                   gallery=embeddings["gallery"], warn=False)
    assert report.nn_outlier_share is None and report.bank_nn_median is None


def test_warning_carries_the_figures_and_the_result_keeps_it():
    bank = np.array([[0.9, 0.1, 0.0]] * 50)  # every bank query retrieves item 0
    queries = np.tile([[0.1, 0.9, 0.0], [0.0, 0.1, 0.9]], (25, 1))  # same top-1s as the bank
    with pytest.warns(QueryBankWarning, match=r"DIS would normalise 0\.0% of them") as caught:
        report = querybank_diagnostics(bank, queries)
    assert [str(record.message) for record in caught] == list(report.warnings)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert querybank_diagnostics(bank, queries, warn=False).warnings == report.warnings


# -- the bundled data's banks (acceptance: warn on far-domain and adversarial, not in-domain)


@pytest.fixture(scope="module")
def bundled():
    data = load_wordnet_revdict()
    bank_sims = data.bank_embeddings @ data.gallery_embeddings.T
    top1 = bank_sims.argmax(axis=1)
    popularity = np.bincount(top1, minlength=len(data.gallery_embeddings))
    # The notebook's adversarial bank: the 1,000 bank queries of the most retrieved items.
    adversarial = np.argsort(-popularity[top1], kind="stable")[:1000]
    banks = {"in-domain": data.bank_embeddings, "far-domain": data.far_bank_embeddings,
             "adversarial": data.bank_embeddings[adversarial]}
    return data, banks


def caught_warnings(bank, queries, **kwargs):
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        querybank_diagnostics(bank, queries, **kwargs)
    return [str(record.message) for record in records
            if issubclass(record.category, QueryBankWarning)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["embeddings", "similarities"])
@pytest.mark.parametrize("bank_name, expected", [
    ("in-domain", []),
    ("far-domain", ["covers little", "out of domain"]),
    ("adversarial", ["covers little"]),
])
def test_bundled_banks(bundled, mode, bank_name, expected):
    data, banks = bundled
    bank, queries, gallery = banks[bank_name], data.query_embeddings, data.gallery_embeddings
    if mode == "embeddings":
        messages = caught_warnings(bank, queries, gallery=gallery)
    else:
        messages = caught_warnings(bank @ gallery.T, queries @ gallery.T)
    assert len(messages) == len(expected)
    report = querybank_diagnostics(bank, queries, gallery=gallery, warn=False)
    assert report.covers_little == (bank_name != "in-domain")
    # Many of the adversarial bank's queries find no bank query near them (29%), but
    # fewer than max_outlier_share.
    assert report.neighbor_gap == (bank_name == "far-domain")
    # The adversarial bank is drawn from the in-domain glosses: its similarities
    # are distributed as the queries' are.
    assert report.depth_gap == (bank_name == "far-domain")
    for message, phrase in zip(messages, expected):
        assert phrase in message


# -- bad input


@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 6))}, ValueError,
     r"bank has shape \(4, 5\), queries have shape \(3, 6\)"),
    ({"bank": np.ones((4, 3)), "queries": np.ones((3, 4)), "gallery": np.ones((5, 3))},
     ValueError, r"embedding dimensions: bank has shape \(4, 3\)"),
    ({"bank": np.ones((4, 5)), "queries": np.ones(5)}, ValueError, "queries"),
    ({"bank": np.ones((4, 5)), "queries": [[1.0, np.nan, 0, 0, 0]]}, ValueError,
     "queries contains NaN"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "k": 6}, ValueError, "k=6"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "depth": 1}, ValueError, "depth"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "max_ks": 0}, ValueError,
     r"max_ks must be in \(0, 1\]"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "max_outlier_share": 1.5},
     ValueError, "max_outlier_share"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "max_ks": "a"}, TypeError, "max_ks"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "warn": "yes"}, TypeError, "warn"),
    ({"bank": np.array([["a"] * 5] * 4), "queries": np.ones((3, 5))}, ValueError, "bank"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "gallery_bank": np.ones((2, 4))},
     ValueError, r"\(2, 4\)"),
    ({"bank": np.ones((4, 3)), "queries": np.ones((3, 3)), "gallery": np.ones((5, 3)),
      "gallery_bank": np.ones((2, 4))}, ValueError, r"gallery_bank has shape \(2, 4\)"),
    ({"bank": np.ones((4, 3)), "queries": np.ones((3, 3)), "gallery": np.ones((5, 2))},
     ValueError, r"bank has shape \(4, 3\), gallery has shape \(5, 2\)"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "k": True}, TypeError, "k=True"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "k": 0}, ValueError, "k=0"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "metric": "l2"}, ValueError,
     "metric='l2'"),
    ({"bank": np.ones((4, 5)), "queries": np.ones((3, 5)), "working_memory": 0}, ValueError,
     "working_memory"),
    ({"bank": [[1.0, np.inf, 0, 0, 0]], "queries": np.ones((3, 5))}, ValueError,
     "bank contains NaN or infinity"),
])
def test_bad_input(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        querybank_diagnostics(**kwargs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("embedded", [False, True])
def test_activation_sets_are_those_dis_and_dbnorm_learn(dtype, embedded):
    """The coverage figures read the activation sets that DIS (and the dynamic DBNorm,
    with a gallery bank) learn from the same bank, at any working_memory."""
    rng = np.random.default_rng(3)
    bank, queries, gallery, gallery_bank = (
        rng.normal(size=(n, 8)).astype(dtype) for n in (300, 40, 500, 120))
    if embedded:
        inputs, fit = (bank, queries), {"gallery": gallery}
        extra = gallery_bank
    else:
        inputs, fit = (unit_rows(bank) @ unit_rows(gallery).T,
                       unit_rows(queries) @ unit_rows(gallery).T), {}
        extra = unit_rows(gallery_bank) @ unit_rows(gallery).T
    dis = DynamicInvertedSoftmax(k=3).fit(inputs[0], **fit)
    dual = DualDynamicInvertedSoftmax(k=3).fit(inputs[0], gallery_bank=extra, **fit)
    query_item = (dis.similarities(queries) if embedded else inputs[1]).argmax(axis=1)
    for working_memory in (None, 0.01):
        report = querybank_diagnostics(*inputs, k=3, gallery_bank=extra, warn=False,
                                       working_memory=working_memory, **fit)
        assert report.gallery_coverage == dis.activated_.mean()
        assert report.dis_share == dis.activated_[query_item].mean()
        assert report.gallery_bank_coverage == dual.gallery_bank_activated_.mean()
        either = dual.activated_ | dual.gallery_bank_activated_
        assert report.dual_dis_share == either[query_item].mean()
