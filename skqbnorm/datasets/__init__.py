"""Datasets: synthetic generators (and, later, bundled real data)."""

from ._synthetic import make_hubness_sims

__all__ = ["make_hubness_sims"]
