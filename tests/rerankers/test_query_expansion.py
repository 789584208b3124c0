"""The alpha-QE / DBA reranker (skqbnorm.rerankers._query_expansion) against explicit
expanded vectors (tests/reference_rerankers.py)."""

import numpy as np
import pytest
from reference_rerankers import alpha_qe_dba

from skqbnorm import QueryExpansionReranker

from helpers import clustered_list, same_ranking


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha, n_query, n_database", [(3.0, 10, 10), (0.0, 5, 0), (1.0, 0, 3),
                                                        (3.0, 1, 1), (2.0, 40, 39)])
def test_query_expansion_equals_explicit_vectors(seed, alpha, n_query, n_database):
    features, initial, query = clustered_list(seed)
    reranker = QueryExpansionReranker(alpha, n_query=n_query, n_database=n_database)
    scores = reranker.fit_predict(features, initial)
    expected = alpha_qe_dba(features, query, alpha, n_query, n_database)
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-8)
    assert same_ranking(scores, expected)


def test_query_expansion_without_steps_keeps_the_initial_scores():
    features, initial, _ = clustered_list(0)
    scores = QueryExpansionReranker(n_query=0, n_database=0).fit_predict(features, initial)
    np.testing.assert_array_equal(scores, initial)
