"""Retrieval sets of several shapes: the catalogue, the shipped files and the loader."""

import hashlib
from importlib import resources

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm.datasets import (
    _retrieval_sets,
    list_retrieval_sets,
    load_retrieval_set,
    load_wordnet_revdict,
)

CATALOGUE = {entry["name"]: entry for entry in list_retrieval_sets()}
SHIPPED = sorted(name for name, entry in CATALOGUE.items() if entry["ships"])
BUILT = sorted(name for name, entry in CATALOGUE.items() if not entry["ships"])
PARTS = ("query", "gallery", "bank", "far_bank", "gallery_bank")


def packaged_file(name):
    return resources.files("skqbnorm.datasets").joinpath("data", f"{name}.npz")


def plain_arrays(name):
    """The arrays of a shipped file, read with NumPy alone."""
    with packaged_file(name).open("rb") as handle, np.load(handle) as arrays:
        return {key: arrays[key] for key in arrays.files}


def reference_sha256(arrays):
    """The catalogue's digest, written out independently: name, dtype, shape, bytes."""
    digest = hashlib.sha256()
    for key in sorted(arrays):
        value = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def test_catalogue_spans_weak_to_strong_encoders_and_ships_its_small_sets():
    assert len(CATALOGUE) >= 6 and "wordnet_revdict" in CATALOGUE
    recalls = [entry["raw_recall_at_1"] for entry in list_retrieval_sets()]
    assert recalls == sorted(recalls) and recalls[0] < 25 and recalls[-1] > 90
    for name, entry in CATALOGUE.items():
        assert entry["encoder"] and entry["source"] and entry["licence"] and entry["description"]
        assert set(entry["sizes"]) == set(PARTS)
        assert len(entry["sha256"]) == 64
        assert packaged_file(name).is_file() == entry["ships"], name
    new_shipped = [name for name in SHIPPED if name != "wordnet_revdict"]
    total = 0
    for name in new_shipped:
        with resources.as_file(packaged_file(name)) as path:
            size = path.stat().st_size
        assert size == CATALOGUE[name]["file_bytes"]
        total += size
    assert total < 12_000_000


def test_list_returns_copies():
    entries = list_retrieval_sets()
    entries[0]["sizes"]["query"] = -1
    entries[0]["ships"] = None
    assert list_retrieval_sets()[0]["sizes"]["query"] > 0
    assert list_retrieval_sets()[0]["ships"] is not None


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_set_matches_its_file_and_catalogue(name):
    entry = CATALOGUE[name]
    raw = plain_arrays(name)
    assert reference_sha256(raw) == entry["sha256"]
    data = load_retrieval_set(name)
    assert data.name == name and data.licence == entry["licence"] and data.DESCR
    for part in PARTS:
        embeddings = data[f"{part}_embeddings"]
        assert embeddings.shape == (entry["sizes"][part], entry["dim"]), part
        assert embeddings.dtype == np.float32
        assert raw[f"{part}_embeddings"].dtype == np.float16
        assert_array_equal(embeddings, raw[f"{part}_embeddings"].astype(np.float32))
        assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=3e-3)
    assert_array_equal(data.query_gt, np.arange(entry["sizes"]["query"]))
    n_gallery_bank = entry["sizes"]["gallery_bank"]
    assert data.bank_gt.shape == (entry["sizes"]["bank"],)
    assert data.bank_gt.min() >= -1 and data.bank_gt.max() < n_gallery_bank
    if "bank_gt" not in raw:  # then bank query i is answered by gallery-bank item i
        n_answered = min(n_gallery_bank, entry["sizes"]["bank"])
        assert_array_equal(data.bank_gt[:n_answered], np.arange(n_answered))
        assert (data.bank_gt[n_answered:] == -1).all()


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_set_raw_recall_is_the_documented_one(name):
    raw = plain_arrays(name)
    queries = raw["query_embeddings"].astype(np.float64)
    gallery = raw["gallery_embeddings"].astype(np.float64)
    best = np.argmax(queries @ gallery.T, axis=1)
    recall = 100.0 * np.mean(best == np.arange(len(queries)))
    assert abs(recall - CATALOGUE[name]["raw_recall_at_1"]) < 0.1  # ties in float64 aside


@pytest.mark.parametrize("name", SHIPPED)
def test_in_domain_bank_queries_find_their_gallery_bank_answers(name):
    """A training task: in-domain bank queries retrieve their answers from the gallery bank
    far above chance, which fails if the two were stored out of order."""
    data = load_retrieval_set(name)
    answered = data.bank_gt >= 0
    scores = data.bank_embeddings[answered] @ data.gallery_bank_embeddings.T
    recall = np.mean(scores.argmax(axis=1) == data.bank_gt[answered])
    assert recall > 10 / len(data.gallery_bank_embeddings) and recall > 0.1


def test_wordnet_revdict_is_delegated():
    data = load_retrieval_set("wordnet_revdict")
    direct = load_wordnet_revdict()
    assert_array_equal(data.query_embeddings, direct.query_embeddings)
    assert_array_equal(data.gallery_bank_words, direct.gallery_bank_words)
    assert data.name == "wordnet_revdict" and "WordNet" in data.licence
    assert_array_equal(data.bank_gt[:3000], np.arange(3000))
    assert (data.bank_gt[3000:] == -1).all()


def test_missing_built_set_names_the_command_that_builds_it(tmp_path):
    name = BUILT[0]
    with pytest.raises(ValueError, match=f"--only {name} --out {tmp_path}"):
        load_retrieval_set(name, data_home=tmp_path)


def test_data_home_defaults_to_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("SKQBNORM_DATA", str(tmp_path / "from_env"))
    with pytest.raises(ValueError, match="from_env"):
        load_retrieval_set(BUILT[0])


def fake_set(path, rows=6, dim=4, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {}
    for part in PARTS:
        vectors = rng.normal(size=(rows, dim))
        arrays[f"{part}_embeddings"] = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float16)
    arrays["provenance"] = np.array('{"name": "fake"}')
    np.savez_compressed(path, **arrays)
    return arrays


def test_built_set_is_checked_against_its_checksum(tmp_path):
    name = BUILT[0]
    fake_set(tmp_path / f"{name}.npz")
    with pytest.raises(ValueError, match="SHA-256 .* verify=False"):
        load_retrieval_set(name, data_home=tmp_path)
    data = load_retrieval_set(name, data_home=tmp_path, verify=False)
    assert data.query_embeddings.shape == (6, 4) and data.query_embeddings.dtype == np.float32
    assert data.provenance == {"name": "fake"}
    assert_array_equal(data.bank_gt, np.arange(6))


def test_a_damaged_shipped_file_fails_its_checksum(tmp_path, monkeypatch):
    name = min(SHIPPED, key=lambda shipped: CATALOGUE[shipped]["file_bytes"])
    arrays = plain_arrays(name)
    arrays["query_embeddings"] = arrays["query_embeddings"].copy()
    arrays["query_embeddings"][0, 0] += np.float16(0.01)  # one value changed
    np.savez_compressed(tmp_path / f"{name}.npz", **arrays)
    entry = dict(_retrieval_sets.RETRIEVAL_SETS[name], ships=False)  # read it from tmp_path
    monkeypatch.setitem(_retrieval_sets.RETRIEVAL_SETS, name, entry)
    with pytest.raises(ValueError, match=CATALOGUE[name]["sha256"]):
        load_retrieval_set(name, data_home=tmp_path)
    # The same arrays saved again (new zip timestamps) pass.
    np.savez_compressed(tmp_path / f"{name}.npz", **plain_arrays(name))
    assert load_retrieval_set(name, data_home=tmp_path).name == name


def test_unknown_name_is_refused():
    with pytest.raises(ValueError, match="name='nope'"):
        load_retrieval_set("nope")
