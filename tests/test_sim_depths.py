"""The simulated links' queue depths (controller/experiment/simulate/depths.py, docs/simulate.md
"Queue depths"): the percentiles on hand-made histograms, and the depths a burst finds on a
link served at 1 Mbit/s."""

from __future__ import annotations

import networkx as nx
import pytest

from controller.experiment.simulate.depths import QueueDepths, depth_percentile, queue_depths
from controller.experiment.simulate.events import EventLoop
from controller.experiment.simulate.network import SimNetwork


def test_percentiles_are_nearest_rank() -> None:
    # 100 frames: 90 found an empty queue, 9 found 5 frames, 1 found 40
    hist = [90, 0, 0, 0, 0, 9] + [0] * 34 + [1]
    assert depth_percentile(hist, 50) == 0
    assert depth_percentile(hist, 90) == 0  # rank 90: the last empty one
    assert depth_percentile(hist, 91) == 5
    assert depth_percentile(hist, 99) == 5  # rank 99
    assert depth_percentile(hist, 100) == 40
    assert queue_depths(hist, "a->b") == QueueDepths(frames=100, p50=0, p99=5, max=40,
                                                     deepest="a->b")
    # 3 frames: rank ceil(1.5) = 2 for the median, ceil(2.97) = 3 for p99
    assert (depth_percentile([1, 1, 1], 50), depth_percentile([1, 1, 1], 99)) == (1, 2)


def test_an_empty_histogram_and_bad_percentiles() -> None:
    assert queue_depths([0, 0, 0], "a->b") == QueueDepths(0, 0, 0, 0, None)
    assert queue_depths([]).record() == {"frames": 0, "p50": 0, "p99": 0, "max": 0,
                                         "deepest": None}
    for q in (0, -1, 100.5):
        with pytest.raises(ValueError, match="percentile"):
            depth_percentile([1], q)


def test_a_burst_finds_the_depths_the_rate_predicts() -> None:
    """Link a→b at 1 Mbit/s with a queue of 3 frames: five 196-byte frames offered at t = 0
    find 0, 1, 2 frames (admitted), then 3 and 3 (dropped: the queue is full); one more at
    t = 4 ms finds 1 (the admitted three leave the wire at 1.568, 3.136 and 4.704 ms: only
    the third is left); one at 1 s finds the link idle.  Link b→a carries nothing and adds
    nothing."""
    g = nx.Graph()
    g.add_edge("a", "b", bw=1.0)
    loop, got = EventLoop(), []
    net = SimNetwork(loop, g, {"a": {"b": 1}, "b": {"a": 1}}, {}, 1.0, 0.0, 3, None,
                     on_host=lambda h, f: got.append(h))
    for _ in range(5):
        net.send("a", 1, bytes(196))
    loop.at(0.004, lambda _: net.send("a", 1, bytes(196)))
    loop.at(1.0, lambda _: net.send("a", 1, bytes(196)))
    loop.run()
    assert got == ["b"] * 5 and net.queue_drops() == 2
    assert net.depth_hist == [2, 2, 1, 2]
    assert net.queue_depths() == QueueDepths(frames=7, p50=1, p99=3, max=3, deepest="a->b")
    net.reset_counters()
    assert net.queue_depths() == QueueDepths(0, 0, 0, 0, None)
