"""The machine's caches and the block sizes that follow (skqbnorm._core._machine):
fake sysfs trees read by hand, the sizes of fake machines by hand, and results bitwise
the same whatever the sizes."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import skqbnorm._core._knn
import skqbnorm._core._machine as machine_module
import skqbnorm._core._parallel
import skqbnorm._core._products
import skqbnorm.normalizers._top_k
import skqbnorm.rerankers._graph
from skqbnorm import CSLS, DynamicInvertedSoftmax, NearestNeighborNormalization
from skqbnorm._core._machine import (
    Cache,
    Machine,
    count_cpus,
    describe_machine,
    gathered_values,
    machine,
    parse_size,
    power_of_two_within,
    read_caches,
    search_part_bytes,
    spread_bytes,
)
from skqbnorm.rerankers import KReciprocalReranker, PointwiseReranker

from helpers import stable_top_k

KiB, MiB = 2**10, 2**20


def fake_sysfs(root, caches):
    """A sysfs ``cache`` folder: one ``index<i>`` folder per ``(level, type, size,
    shared_cpu_list)``, a None leaving that file out."""
    for index, files in enumerate(caches):
        folder = root / f"index{index}"
        folder.mkdir(parents=True)
        for name, text in zip(("level", "type", "size", "shared_cpu_list"), files):
            if text is not None:
                (folder / name).write_text(f"{text}\n")
    return root


# -- reading the caches ----------------------------------------------------------------

def test_reads_an_epyc_vm_tree(tmp_path):
    root = fake_sysfs(tmp_path, [(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                 (2, "Unified", "1024K", "0"), (3, "Unified", "32768K", "0-1")])
    caches = read_caches(root)
    assert caches == {1: Cache(48 * KiB, 1), 2: Cache(MiB, 1), 3: Cache(32 * MiB, 2)}
    described = describe_machine(caches, 2)
    assert described.last_level == Cache(32 * MiB, 2)
    assert described.last_level_share == 16 * MiB
    assert set(described.caches) == {2, 3}  # the L1 is not a block's cache


def test_a_missing_tree_reads_as_no_caches(tmp_path):
    assert read_caches(tmp_path / "absent") == {}
    assert read_caches(tmp_path) == {}  # a folder without index folders


def test_instruction_caches_and_unreadable_entries_are_left_out(tmp_path):
    root = fake_sysfs(tmp_path, [
        (2, "Instruction", "4M", "0"),  # larger, but not data
        (2, "Data", "512K", "0-3"),
        (3, "Unified", "lots", "0-7"),  # unreadable size
        (4, "Unified", None, "0-7"),  # no size at all
        ("x", "Unified", "8M", "0"),  # unreadable level
        (5, "Unified", "0K", "0"),  # no size
    ])
    assert read_caches(root) == {2: Cache(512 * KiB, 4)}
    assert describe_machine(read_caches(root), 8).last_level == Cache(512 * KiB, 4)


def test_unknown_sharing_is_taken_as_all_cpus_beyond_the_l2(tmp_path):
    root = fake_sysfs(tmp_path, [(2, "Unified", "2M", None), (3, "Unified", "64M", "")])
    assert read_caches(root) == {2: Cache(2 * MiB, 0), 3: Cache(64 * MiB, 0)}
    described = describe_machine(read_caches(root), 8)
    assert described.caches == {2: Cache(2 * MiB, 1), 3: Cache(64 * MiB, 8)}
    assert described.last_level_share == 8 * MiB


def test_without_sysfs_the_caches_come_from_sysconf_else_the_fallbacks(monkeypatch):
    def sysconf(name):
        sizes = {"SC_LEVEL2_CACHE_SIZE": 2 * MiB, "SC_LEVEL3_CACHE_SIZE": 0}
        if name not in sizes:
            raise ValueError(name)  # as os.sysconf does for a name it does not know
        return sizes[name]

    monkeypatch.setattr(machine_module.os, "sysconf", sysconf)
    assert describe_machine({}, 4) == Machine({2: Cache(2 * MiB, 1)})
    monkeypatch.setattr(machine_module.os, "sysconf", lambda name: -1)  # known, not given
    fallback = describe_machine({1: Cache(32 * KiB, 1)}, 16)
    assert fallback == Machine({3: Cache(32 * MiB, 16)})  # shared by the machine's CPUs
    assert describe_machine({}, 0).last_level.n_cpus == 1  # os.cpu_count() may say 0 or None
    assert describe_machine({}, None).last_level.n_cpus == 1
    monkeypatch.delattr(machine_module.os, "sysconf")  # Windows has none
    assert describe_machine({}, 4) == Machine({3: Cache(32 * MiB, 4)})


def test_sysconf_fills_in_a_level_that_sysfs_lacks(tmp_path, monkeypatch):
    sizes = {"SC_LEVEL2_CACHE_SIZE": 4 * MiB, "SC_LEVEL3_CACHE_SIZE": 64 * MiB}
    monkeypatch.setattr(machine_module.os, "sysconf", lambda name: sizes.get(name, 0))
    root = fake_sysfs(tmp_path, [(2, "Unified", "1M", "0"), (3, "Unified", None, "0-7")])
    described = describe_machine(read_caches(root), 8)
    assert described.caches == {2: Cache(MiB, 1), 3: Cache(64 * MiB, 8)}  # sysfs wins its L2


@pytest.mark.parametrize(("text", "size"), [("48K", 48 * KiB), ("32768K", 32 * MiB), ("1M", MiB),
                                            ("2G", 2**31), ("512", 512), ("64KB", 64 * KiB)])
def test_sizes_parse_as_sysfs_writes_them(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "K", "1.5M", "-1K", "12T"])
def test_other_sizes_are_refused(text):
    with pytest.raises(ValueError, match="not a cache size"):
        parse_size(text)


@pytest.mark.parametrize(("cpu_list", "count"), [("0", 1), ("0-1", 2), ("0-7,128-135", 16),
                                                 ("1,3,5", 3)])
def test_cpu_lists_count_their_cpus(cpu_list, count):
    assert count_cpus(cpu_list) == count


def test_this_machine_is_read_once():
    assert machine() is machine()
    assert machine().last_level.n_cpus >= 1 and min(machine().caches) >= 2


# -- the sizes that follow ---------------------------------------------------------------

def machine_of(last_level, sharing):
    return Machine({2: Cache(min(last_level, MiB), 1), 3: Cache(last_level, sharing)})


#: (machine, search part bytes, spread bytes, gathered values), by hand:
#: part = share / 4, spread = last level / 2, gathered = share / 16, each rounded down
#: to a power of two within [4 MiB, 16 MiB], [16 MiB, 64 MiB], [2^20, 2^22].
MACHINES = {
    "32 MiB for 2 CPUs": (machine_of(32 * MiB, 2), 4 * MiB, 16 * MiB, 2**20),
    "64 MiB for 2 CPUs": (machine_of(64 * MiB, 2), 8 * MiB, 32 * MiB, 2**21),
    "no L3: an L2 of 512 KiB, 1 CPU": (Machine({2: Cache(512 * KiB, 1)}), 4 * MiB, 16 * MiB, 2**20),
    "512 MiB for 1 CPU": (machine_of(512 * MiB, 1), 16 * MiB, 64 * MiB, 2**22),
    "256 MiB for 256 CPUs": (machine_of(256 * MiB, 256), 4 * MiB, 64 * MiB, 2**20),
    "96 MiB for 8 CPUs": (machine_of(96 * MiB, 8), 4 * MiB, 32 * MiB, 2**20),
}


@pytest.mark.parametrize("case", MACHINES.values(), ids=MACHINES.keys())
def test_block_sizes_of_fake_machines_by_hand(case):
    fake, part, spread, gathered = case
    assert search_part_bytes(fake) == part
    assert spread_bytes(fake) == spread
    assert gathered_values(fake) == gathered


@pytest.mark.parametrize(("size", "low", "high", "expected"), [
    (3 * MiB, MiB, 16 * MiB, 2 * MiB), (MiB, MiB, 16 * MiB, MiB), (5, MiB, 16 * MiB, MiB),
    (0, 4, 64, 4), (2**40, 4, 64, 64), (63, 1, 64, 32)])
def test_power_of_two_within_by_hand(size, low, high, expected):
    assert power_of_two_within(size, low, high) == expected


def test_the_packages_sizes_are_this_machines():
    here = machine()
    assert skqbnorm.normalizers._top_k.SEARCH_PART_BYTES == search_part_bytes(here)
    assert skqbnorm._core._products.SPREAD_BYTES == spread_bytes(here)
    assert skqbnorm.rerankers._graph.BLOCK_VALUES == gathered_values(here)
    assert skqbnorm._core._knn.PAIR_VALUES == gathered_values(here)


# -- results do not depend on the machine ------------------------------------------------

def take_sizes(monkeypatch, sizes):
    """Every machine-derived size of the package: (search part bytes, spread bytes,
    gathered values)."""
    part, spread, gathered = sizes
    monkeypatch.setattr(skqbnorm.normalizers._top_k, "SEARCH_PART_BYTES", part)
    monkeypatch.setattr(skqbnorm._core._products, "SPREAD_BYTES", spread)
    monkeypatch.setattr(skqbnorm.rerankers._graph, "BLOCK_VALUES", gathered)
    monkeypatch.setattr(skqbnorm._core._knn, "PAIR_VALUES", gathered)


#: Sizes below any machine's (the formulas' floors) and a huge machine's, so that the
#: splits differ: the property holds for any sizes.
EXTREMES = {"tiny": (MiB, MiB, 2**18), "huge": MACHINES["512 MiB for 1 CPU"][1:]}


def searches(rng):
    """Searches whose parts, spreading and blocks differ between the extremes: 200
    queries over a gallery of 20,000 (13 to 209 rows a part of a search by bias or
    scores), one and three queries of 32 dimensions (2.5 MB, spread only at the tiny
    sizes, over two threads)."""
    bank, gallery = rng.normal(size=(300, 32)), rng.normal(size=(20_000, 32))
    bank, gallery = bank.astype(np.float32), gallery.astype(np.float32)
    queries = rng.normal(size=(200, 32)).astype(np.float32)
    results = []
    for estimator in (DynamicInvertedSoftmax(), CSLS(k=8), NearestNeighborNormalization(k=8)):
        fitted = estimator.fit(bank, gallery=gallery)
        sims = fitted.similarities(queries)
        results += [fitted.transform(sims), *fitted.top_k(sims, k=10),
                    fitted.top_k(sims, k=10, return_scores=False)]
        for few in (queries[:1], queries[:3]):
            results += [*fitted.top_k(queries=few, k=10), fitted.top_k(queries=few, k=10, return_scores=False)]
    return results


def rerankings(rng):
    """k-NN graphs and k-reciprocal lists of 1,024-dimensional features: 19 to 64 rows
    of candidates' values a block, 257 to 4,097 pairs a block of similarities."""
    features, initial = rng.normal(size=(300, 1024)), rng.uniform(-1, 1, size=300)
    features[1] = features[0]  # equal rows, searched once
    return [PointwiseReranker().fit_predict(features, initial),
            KReciprocalReranker().fit_predict(features, initial)]


@pytest.mark.parametrize("compute", [searches, rerankings])
def test_results_are_bitwise_the_same_for_any_block_sizes(monkeypatch, compute):
    monkeypatch.setattr(skqbnorm._core._parallel, "blas_threads", lambda: 2)
    expected = compute(np.random.default_rng(0))
    for sizes in EXTREMES.values():
        take_sizes(monkeypatch, sizes)
        for found, wanted in zip(compute(np.random.default_rng(0)), expected, strict=True):
            assert_array_equal(found, wanted)


def test_the_extremes_change_the_blocks():
    # so that the test above compares different splits
    (tiny_part, tiny_spread, tiny_gathered), (huge_part, huge_spread, huge_gathered) = EXTREMES.values()
    assert tiny_part < huge_part and tiny_gathered < huge_gathered
    assert tiny_spread < 20_000 * 32 * 4 < huge_spread


def test_searches_agree_with_a_plain_sort_at_the_tiny_sizes(rng, monkeypatch):
    # the bitwise comparison above is against the real search, not against itself
    take_sizes(monkeypatch, EXTREMES["tiny"])
    bank, gallery = rng.normal(size=(50, 16)), rng.normal(size=(20_000, 16))
    fitted = DynamicInvertedSoftmax().fit(bank, gallery=gallery)
    sims = fitted.similarities(rng.normal(size=(40, 16)))
    indices, scores = fitted.top_k(sims, k=5)
    expected = stable_top_k(fitted.transform(sims), 5)
    assert_array_equal(indices, expected[0])
    assert_array_equal(scores, expected[1])
