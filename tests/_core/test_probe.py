"""The probe matrix (skqbnorm._core._probe): row blocks of the bank-by-gallery
similarities, numbered and computed as by hand."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skqbnorm._core import ProbeMatrix, prepare_embeddings

MIB = 2**20


def test_product_rows_by_hand():
    # 256 MiB of products: 2**28 / (2**18 columns * 8 B) = 128 rows; float32 fits 256.
    wide = np.ones((1, 2**18))
    assert ProbeMatrix(np.ones((1, 1)), wide).product_rows() == 128
    assert ProbeMatrix(np.ones((1, 1)), wide, dtype=np.float32).product_rows() == 256
    assert ProbeMatrix(np.ones((1, 1)), wide).product_rows(align=512) == 512
    assert ProbeMatrix(np.ones((3, 1)), np.ones((1, 1000))).product_rows() == 2048  # the cap
    # 2**28 / (200_000 * 8) = 167.8 rows: the power of two below.
    assert ProbeMatrix(np.ones((1, 1)), np.ones((1, 200_000))).product_rows() == 128


def test_embedding_blocks_are_numbered_and_computed_by_hand():
    # 2,100 bank rows in products of 2,048 rows, handed on in slices of 1,000 rows
    # (72,000 B / (3 columns * 8 B * 3 buffers)), numbered from first_row.
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(2100, 2))
    gallery_t = rng.normal(size=(2, 3))
    probe = ProbeMatrix(bank, gallery_t)
    for first_row in [0, 4096]:
        blocks = list(probe.blocks(72_000 / MIB, first_row=first_row))
        bounds = [(0, 1000), (1000, 2000), (2000, 2048), (2048, 2100)]
        expected = [(first_row + start, first_row + stop) for start, stop in bounds]
        assert [(rows.start, rows.stop) for rows, _ in blocks] == expected
        for (start, stop), (_, block) in zip(bounds, blocks):
            assert_allclose(block, bank[start:stop] @ gallery_t, rtol=1e-12)


def test_a_non_finite_embedding_is_numbered_from_first_row():
    bank = np.ones((8, 2))
    bank[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"embedding 14, dimension 1 "):
        ProbeMatrix(bank, np.ones((2, 3))).block(slice(3, 6), first_row=10)


def test_probe_entries_broadcast_rows_and_columns_either_way(rng):
    values = rng.normal(size=(6, 5))
    rows, columns = np.array([[1], [4]]), np.array([[0, 3, 2], [4, 1, 1]])
    for bank in (values, np.asfortranarray(values)):
        assert_array_equal(ProbeMatrix(bank).entries(rows, columns), values[rows, columns])
        assert_array_equal(ProbeMatrix(bank).entries(columns, rows), values[columns, rows])


@pytest.mark.parametrize("scale", [1.0, 1e-170, 1e200])
def test_prepare_embeddings_gives_unit_rows_at_any_scale(rng, scale):
    embeddings = rng.normal(size=(6, 5))
    embeddings[2] = 0.0  # a zero row stays zero
    unit = prepare_embeddings(embeddings * scale, "cosine")
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    expected = np.divide(embeddings, norms, out=np.zeros_like(embeddings), where=norms > 0)
    assert_allclose(unit, expected, rtol=1e-15, atol=1e-300)
    assert unit.flags.c_contiguous
    assert prepare_embeddings(embeddings, "dot") is embeddings
