"""The array API namespace helpers: which path a call takes, the widest float of a
device, moving arrays, and the top-k adapter against a NumPy reference."""

import importlib.util
import sys
from contextlib import nullcontext
from types import SimpleNamespace

import numpy as np
import pytest
import sklearn

from skqbnorm._core import rows_per_chunk
from skqbnorm._core._array_api import (
    DEVICE_MEMORY_SHARE,
    DEVICE_WORKING_MEMORY_CAP,
    HOST_DEVICE_WORKING_MEMORY,
    FiniteFlag,
    check_finite,
    device_working_memory,
    max_float,
    namespace,
    namespace_name,
    to_numpy,
    top_k,
)

from array_api_cases import NAMESPACES, host, namespace_and_device, put


def reference_top_k(values, k, axis=-1):
    """Largest k along ``axis``, ties to the lowest index: a stable sort of the negation."""
    order = np.argsort(-values, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(values, indices, axis=axis), indices


def test_numpy_path_without_dispatch_or_with_numpy_inputs():
    strict = pytest.importorskip("array_api_strict")
    device_array = strict.asarray([1.0, 2.0])
    assert namespace(device_array) == (np, False)  # dispatch off: today's path
    with sklearn.config_context(array_api_dispatch=True):
        assert namespace(np.ones(3), None, [1, 2]) == (np, False)
        xp, is_array_api = namespace(None, device_array)
    assert is_array_api and namespace_name(xp) == "array_api_strict"


def test_mixed_namespaces_are_refused():
    strict = pytest.importorskip("array_api_strict")
    torch = pytest.importorskip("torch")
    with sklearn.config_context(array_api_dispatch=True), pytest.raises(
            ValueError, match="same namespace"):
        namespace(strict.asarray([1.0]), torch.asarray([1.0]))


def test_missing_array_api_compat_says_how_to_install(monkeypatch):
    strict = pytest.importorskip("array_api_strict")
    if importlib.util.find_spec("sklearn.externals.array_api_compat") is None:
        pytest.skip("this scikit-learn imports array_api_compat itself to enable dispatch")
    monkeypatch.setitem(sys.modules, "array_api_compat", None)
    with sklearn.config_context(array_api_dispatch=True), pytest.raises(
            ImportError, match="pip install array-api-compat"):
        namespace(strict.asarray([1.0]))
    assert namespace(strict.asarray([1.0])) == (np, False)  # without dispatch: never imported


@pytest.mark.parametrize("case", NAMESPACES)
def test_max_float_and_round_trip(case):
    xp, device = namespace_and_device(case)
    values = np.arange(6.0).reshape(2, 3)
    array = put(xp, device, values)
    with sklearn.config_context(array_api_dispatch=True):
        compat_xp, _ = namespace(array)
    assert max_float(compat_xp, device) == compat_xp.float64  # all of the cases have float64
    np.testing.assert_array_equal(to_numpy(array), values)
    assert to_numpy(values) is values


@pytest.mark.parametrize("case", NAMESPACES)
@pytest.mark.parametrize("axis", [0, 1])
def test_top_k_matches_a_stable_sort(case, axis):
    xp, device = namespace_and_device(case)
    rng = np.random.default_rng(0)
    values = rng.normal(size=(7, 9))
    with sklearn.config_context(array_api_dispatch=True):
        compat_xp, _ = namespace(put(xp, device, values))
    for k in (1, 3, values.shape[axis]):
        best, where = top_k(compat_xp, put(xp, device, values), k, axis=axis)
        expected_best, expected_where = reference_top_k(values, k, axis=axis)
        np.testing.assert_array_equal(host(best), expected_best)
        np.testing.assert_array_equal(host(where), expected_where)


def test_top_k_fallback_breaks_ties_to_the_lowest_index():
    strict = pytest.importorskip("array_api_strict")
    values = np.array([[0.5, 0.9, 0.5, 0.9, 0.1], [1.0, 1.0, 1.0, 1.0, 1.0]])
    with sklearn.config_context(array_api_dispatch=True):
        xp, _ = namespace(strict.asarray(values))
    best, where = top_k(xp, strict.asarray(values), 3)
    np.testing.assert_array_equal(host(where), [[1, 3, 0], [0, 1, 2]])
    np.testing.assert_array_equal(host(best), [[0.9, 0.9, 0.5], [1.0, 1.0, 1.0]])


def test_check_finite_names_the_first_bad_entry():
    strict = pytest.importorskip("array_api_strict")
    block = np.ones((3, 4))
    block[2, 1] = np.nan
    with sklearn.config_context(array_api_dispatch=True):
        xp, _ = namespace(strict.asarray(block))
    check_finite(xp, strict.asarray(np.ones((3, 4))), slice(0, 3), "X")
    with pytest.raises(ValueError, match="X row 12 to gallery item 1 is nan"):
        check_finite(xp, strict.asarray(block), slice(10, 13), "X")


# -- the blocks' memory budget on a device --------------------------------------------

MiB = 2**20


@pytest.mark.parametrize("case", NAMESPACES)
def test_cpu_backed_namespaces_take_the_documented_default(case):
    xp, device = namespace_and_device(case)
    with sklearn.config_context(array_api_dispatch=True):
        compat_xp, _ = namespace(put(xp, device, np.ones(2)))
    assert device_working_memory(compat_xp, device) == HOST_DEVICE_WORKING_MEMORY == 256
    # an explicit budget is returned exactly, however small or large
    for explicit in (0.001, 2, 16, 100_000):
        assert device_working_memory(compat_xp, device, explicit) == explicit


def fake_torch_cuda(monkeypatch, free_bytes, calls):
    """A ``torch`` module whose CUDA device has ``free_bytes`` free (of 80 GiB)."""
    def mem_get_info(device=None):
        calls.append(device)
        return free_bytes, 80 * 1024 * MiB

    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(
        cuda=SimpleNamespace(mem_get_info=mem_get_info)))
    return SimpleNamespace(__name__="array_api_compat.torch"), SimpleNamespace(type="cuda", index=1)


@pytest.mark.parametrize(("free_mib", "expected"), [
    (8 * 1024, DEVICE_MEMORY_SHARE * 8 * 1024),  # a quarter of the free memory
    (64 * 1024, DEVICE_WORKING_MEMORY_CAP),  # at most the cap
    (20, 16),  # at least the host default
])
def test_cuda_budget_is_a_share_of_the_free_memory(monkeypatch, free_mib, expected):
    calls = []
    xp, cuda = fake_torch_cuda(monkeypatch, free_mib * MiB, calls)
    assert device_working_memory(xp, cuda) == pytest.approx(expected)
    assert calls == [cuda]  # the free memory of the array's own device
    assert device_working_memory(xp, cuda, working_memory=3) == 3  # explicit wins
    assert len(calls) == 1  # ... without asking the device
    assert DEVICE_WORKING_MEMORY_CAP == 4096 and DEVICE_MEMORY_SHARE == 0.25


def test_torch_cpu_device_is_not_asked_for_free_memory(monkeypatch):
    calls = []
    xp, _ = fake_torch_cuda(monkeypatch, 8 * 1024 * MiB, calls)
    assert device_working_memory(xp, SimpleNamespace(type="cpu")) == HOST_DEVICE_WORKING_MEMORY
    assert calls == []


def test_cupy_budget_counts_its_pool_as_free(monkeypatch):
    entered = []
    cupy = SimpleNamespace(
        cuda=SimpleNamespace(
            Device=lambda index: entered.append(index) or nullcontext(),
            runtime=SimpleNamespace(memGetInfo=lambda: (1024 * MiB, 80 * 1024 * MiB))),
        get_default_memory_pool=lambda: SimpleNamespace(free_bytes=lambda: 3072 * MiB))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    xp = SimpleNamespace(__name__="array_api_compat.cupy")
    assert device_working_memory(xp, SimpleNamespace(id=2)) == pytest.approx(0.25 * 4096)
    assert entered == [2]


def test_the_budget_sizes_blocks_as_rows_per_chunk_does():
    """At the CPU-backed default, a gallery of 10,000 in float64 with four buffers
    takes 838 rows a block (the host default of 16 MiB took 52)."""
    strict = pytest.importorskip("array_api_strict")
    budget = device_working_memory(strict, strict.Device("CPU_DEVICE"))
    assert rows_per_chunk(10_000, 8, budget, 4) == 838
    assert rows_per_chunk(10_000, 8, None, 4) == 52


def test_finite_flag_is_false_once_any_block_is_not():
    strict = pytest.importorskip("array_api_strict")
    flag = FiniteFlag(strict, strict.Device("CPU_DEVICE"))
    assert bool(flag)
    flag.add(strict.ones((2, 3)))
    assert bool(flag)
    flag.add(strict.asarray([[1.0, -np.inf]]))
    flag.add(strict.ones((2, 3)))  # a later finite block does not clear it
    assert not bool(flag)
