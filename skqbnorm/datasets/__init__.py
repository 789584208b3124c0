"""Datasets: a retrieval task on real images and synthetic generators."""

from ._digits import load_digits_reranking, load_digits_retrieval
from ._synthetic import make_hubness_sims

__all__ = ["load_digits_reranking", "load_digits_retrieval", "make_hubness_sims"]
