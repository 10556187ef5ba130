"""tritium-analyzer's plots: concurrency labels never overlap; a label repeated at the same spot is drawn once."""

from __future__ import annotations

import itertools

import pytest

plt = pytest.importorskip("matplotlib.pyplot")

from matplotlib.text import Text  # noqa: E402

from tritium.analyzer.plots import place_labels  # noqa: E402


def test_labels_do_not_overlap_and_same_spot_repeats_are_dropped() -> None:
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 1000)
    points = [
        (1.0, 100.0, "c1"),
        (1.0, 100.0, "c1"),  # another configuration measured alike: one label serves both
        (1.0, 101.0, "c1"),
        (1.02, 102.0, "c2"),  # a different label on the same spot moves up
        (1.0, 100.0, "c4"),
        (5.0, 500.0, "c8"),
    ]
    labels = place_labels(ax, points)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert [a.get_text() for a in labels] == ["c1", "c2", "c4", "c8"]
    for a in labels:
        a.update_positions(renderer)
    boxes = [Text.get_window_extent(a, renderer) for a in labels]
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    assert [a.xyann for a in labels] == [(4, 3.0), (4, 14.0), (4, 25.0), (4, 3.0)]
    assert [a.arrow_patch is not None for a in labels] == [False, True, True, False]  # a line to a moved label's point
    plt.close(fig)
