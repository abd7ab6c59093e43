"""Node profiles, feature history and the docs/design.md §7 normalization, on hand-made numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workers.cluster.features import (
    FEATURES,
    FeatureHistory,
    ProfileError,
    load_profile,
    mininet_limits,
    node_vectors,
    normalize,
    profile_from_dict,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "profiles" / "hetero8.json"


def test_normalize_hand_made_history_including_max_equal_min():
    # 2 periods x 3 nodes x 2 features.  Feature 0 pooled over all 6 values {1,2,3,3,4,5}:
    # max 5, min 1, mean 18/6 = 3, so the latest (3, 4, 5) -> ((3-3)/4, (4-3)/4, (5-3)/4).
    # Feature 1 is 7 everywhere: max = min -> 0 for every node.
    hist = np.array([[[1, 7], [2, 7], [3, 7]],
                     [[3, 7], [4, 7], [5, 7]]], dtype=float)
    out = normalize(hist[-1], hist)
    assert out.tolist() == [[0.0, 0.0], [0.25, 0.0], [0.5, 0.0]]


def test_normalize_statistics_pool_nodes_and_periods():
    # One node per period would give max = min; pooling over nodes does not.
    hist = np.array([[[10.0], [30.0]]])  # 1 period, 2 nodes: mean 20, span 20
    assert normalize(hist[0], hist).ravel().tolist() == [-0.5, 0.5]
    # A node whose value is far from its own history still compares with the pooled mean.
    hist2 = np.array([[[0.0], [0.0]], [[8.0], [0.0]]])  # pooled: max 8, min 0, mean 2
    assert normalize(hist2[-1], hist2).ravel().tolist() == [0.75, -0.25]


def test_history_window_and_weights():
    h = FeatureHistory(["a", "b"], ["cpu_freq", "uplink_bw"], window=2)
    h.record([[1.0, 100.0], [3.0, 100.0]])
    h.record([[2.0, 100.0], [2.0, 100.0]])
    h.record([[4.0, 10.0], [0.0, 30.0]])  # period 0 drops out of the window
    assert len(h) == 2
    # cpu_freq over {2,2,4,0}: max 4, min 0, mean 2 -> (4-2)/4, (0-2)/4
    # uplink_bw over {100,100,10,30}: max 100, min 10, mean 60 -> (10-60)/90, (30-60)/90
    v = node_vectors(h, [2.0, 0.5])
    np.testing.assert_allclose(v, [[2 * 0.5, 0.5 * -50 / 90], [2 * -0.5, 0.5 * -30 / 90]])
    np.testing.assert_allclose(node_vectors(h), [[0.5, -50 / 90], [-0.5, -30 / 90]])
    with pytest.raises(ValueError, match="one weight per feature"):
        node_vectors(h, [1.0])
    with pytest.raises(ValueError, match="shape"):
        h.record([[1.0, 2.0]])
    with pytest.raises(ValueError, match="empty"):
        FeatureHistory(["a"], ["memory"]).stack()


def test_profile_patterns_weights_and_mininet_limits():
    prof = profile_from_dict({
        "weights": {"uplink_bw": 3},
        "nodes": {"h10": {"uplink_bw": 5, "cpu_share": [0.5, 0.25]},
                  "h2": {"cpu_share": 0.1, "uplink_bw": [1, 2, 3]}},
    }, "p.json")
    assert prof.nodes == ("h2", "h10")  # natural name order
    assert prof.features == ("cpu_share", "uplink_bw")  # canonical FEATURES order
    assert prof.sample(0).tolist() == [[0.1, 1.0], [0.5, 5.0]]
    assert prof.sample(5).tolist() == [[0.1, 3.0], [0.25, 5.0]]  # 5 % 3 = 2, 5 % 2 = 1
    assert prof.weight_vector().tolist() == [1.0, 3.0]
    assert mininet_limits(prof, 1) == {"h2": {"cpu": 0.1, "bw": 2.0},
                                       "h10": {"cpu": 0.25, "bw": 5.0}}
    h = prof.history(3)
    assert len(h) == 3 and h.latest().tolist() == prof.sample(2).tolist()


def test_example_profile_has_every_feature():
    prof = load_profile(EXAMPLE)
    assert prof.name == "hetero8"
    assert prof.nodes == tuple(f"h{i}" for i in range(1, 9))
    assert prof.features == FEATURES


@pytest.mark.parametrize("data, message", [
    ([], "top level must be an object"),
    ({"nodes": {}}, "'nodes' must be a non-empty object"),
    ({"nodes": {"h1": {"cpu_freq": 1}}, "extra": 1}, "unknown top-level key 'extra'"),
    ({"nodes": {"h1": {"cpu_clock": 1}}}, "node 'h1': unknown feature 'cpu_clock'"),
    ({"nodes": {"h1": {"memory": -4}}}, "node 'h1': feature 'memory' must be a positive"),
    ({"nodes": {"h1": {"memory": True}}}, "node 'h1': feature 'memory' must be a positive"),
    ({"nodes": {"h1": {"memory": []}}}, "node 'h1': feature 'memory' must be a positive"),
    ({"nodes": {"h1": {"memory": [1, "x"]}}}, "node 'h1': feature 'memory' must be a positive"),
    ({"nodes": {"h1": {}}}, "node 'h1': features must be a non-empty object"),
    ({"nodes": {"h1": {"cpu_share": [0.5, 2]}}}, "node 'h1': cpu_share is a fraction"),
    ({"nodes": {"h1": {"memory": 1, "disk_io": 2}, "h2": {"memory": 1}}},
     "node 'h2': missing feature 'disk_io' \\(node 'h1' has it\\)"),
    ({"nodes": {"h1": {"memory": 1}, "h2": {"memory": 1, "disk_io": 2}}},
     "node 'h2': feature 'disk_io' is not given for node 'h1'"),
    ({"nodes": {"h1": {"memory": 1}}, "weights": {"disk_io": 1}},
     "weights: feature 'disk_io' is not given"),
    ({"nodes": {"h1": {"memory": 1}}, "weights": {"memory": -1}},
     "weights: feature 'memory' must have a number >= 0"),
    ({"nodes": {"h1": {"memory": 1}}, "weights": {"memory": 0}},
     "weights: every feature has weight 0"),
])
def test_profile_errors_name_file_and_node(tmp_path, data, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=f"^{path}: {message}") as err:
        load_profile(path)
    assert "\n" not in str(err.value)


def test_profile_file_errors(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"nodes": {\n  "h1": }')
    with pytest.raises(ProfileError, match=rf"^{bad}:2:9: bad JSON"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="cannot read node profile"):
        load_profile(tmp_path / "missing.json")
