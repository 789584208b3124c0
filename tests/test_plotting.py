"""The plotting helpers draw what the paired comparison and curves hold."""

import numpy as np
import pytest

from skqbnorm.metrics import (
    paired_comparison,
)

from helpers import pair_of_rankings


def test_plot_changes_draws_dots_and_whiskers_around_a_zero_line():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skqbnorm.plotting import plot_changes

    a, b, gt = pair_of_rankings(10)
    comparison = paired_comparison(a, b, gt, n_resamples=100, random_state=0)
    # A change of medians may lie outside its percentile interval (2.0 past [0.5, 1.5]).
    changes = {"in-domain": {"IS": comparison, "DIS": (2.0, 0.5, 1.5)},
               "far-domain": {"IS": (-1.0, -2.0, 0.5), "DIS": (0.25, None, None)}}
    fig, ax = plt.subplots()
    try:
        assert plot_changes(changes, "MnR", ax=ax) is ax
        assert not ax.patches  # no bars
        assert [label.get_text() for label in ax.get_yticklabels()] == ["IS", "DIS"]
        zero = [line for line in ax.lines if list(line.get_xdata()) == [0, 0]]
        assert len(zero) == 1
        near_dots, far_dots = (line for line in ax.lines if line.get_label() in ("in-domain", "far-domain"))
        assert (near_dots.get_label(), far_dots.get_label()) == ("in-domain", "far-domain")
        np.testing.assert_allclose(near_dots.get_xdata(), [comparison.change["MnR"], 2.0])
        np.testing.assert_allclose(near_dots.get_ydata(), [-0.15, 0.85])
        np.testing.assert_allclose(far_dots.get_ydata(), [0.15])  # DIS has no interval
        near_whiskers, far_whiskers = ax.collections
        np.testing.assert_allclose([segment[:, 0] for segment in near_whiskers.get_segments()],
                                   [comparison.interval["MnR"], (0.5, 1.5)])
        assert len(far_whiskers.get_segments()) == 1
        hollow = [line for line in ax.lines if line.get_markerfacecolor() == "white"
                  and len(line.get_xdata())]
        assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [0.25]
    finally:
        plt.close(fig)


def test_plot_curves_draws_each_points_interval():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skqbnorm.plotting import plot_curves

    fig, ax = plt.subplots()
    try:
        plot_curves([1, 10, 100], {"IS": [0.5, 1.0, -0.5], "DIS": [0.2, 0.4, 0.6]},
                    xlabel="beta", ylabel="change in R@1", logx=True,
                    intervals={"IS": [[0.0, 0.2, -1.5], [1.0, 1.8, 0.5]]}, ax=ax)
        (whiskers,) = ax.collections  # DIS has none
        np.testing.assert_allclose([segment[:, 1] for segment in whiskers.get_segments()],
                                   [[0.0, 1.0], [0.2, 1.8], [-1.5, 0.5]])
        assert [line.get_label() for line in ax.lines] == ["IS", "DIS"]
    finally:
        plt.close(fig)


@pytest.mark.parametrize("intervals, message", [
    ({"IS": [(0.0, 1.0), (0.5, 1.5), (1.0, 2.0)]}, r"intervals\['IS'\] must hold .* shape \(2, 3\) .* got shape \(3, 2\)"),
    ({"IS": [[0.0], [1.0]]}, r"got shape \(2, 1\)"),
    ({"DIS": [[0.0] * 3, [1.0] * 3]}, r"intervals names curves that are not drawn: \['DIS'\]"),
])
def test_plot_curves_refuses_intervals_of_the_wrong_shape(intervals, message):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skqbnorm.plotting import plot_curves

    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError, match=message):
            plot_curves([1, 2, 3], {"IS": [0.5, 1.0, 1.5]}, xlabel="x", ylabel="y",
                        intervals=intervals, ax=ax)
    finally:
        plt.close(fig)
