"""Node physical features for clustered temporary parameter servers (docs/design.md §7 steps 1–2).

Nothing here does I/O except :func:`load_profile` (read one JSON file).  The rest is pure:
a profile gives each node's features per exchange period, a :class:`FeatureHistory` keeps
what was collected, and :func:`node_vectors` turns the history into the weighted, normalized
vectors that :mod:`workers.cluster.clustering` clusters.

Features (any subset; every node of a profile must give the same subset)
    ``cpu_freq``    CPU clock frequency, GHz
    ``cpu_share``   fraction of the machine's CPU given to the node, (0, 1]
                    (Mininet ``CPULimitedHost(cpu=...)``)
    ``memory``      memory size, GB
    ``gpu_freq``    GPU clock frequency, GHz
    ``gpu_memory``  GPU memory size, GB
    ``disk_io``     disk I/O throughput, MB/s
    ``uplink_bw``   uplink bandwidth, Mbit/s (Mininet ``TCLink(bw=...)`` of the access link)

Profile file (JSON)::

    {"name": "hetero8",                              # optional
     "weights": {"uplink_bw": 2.0},                  # optional, default 1.0 per feature
     "nodes": {"h1": {"cpu_freq": 3.6, "cpu_share": 0.2, "uplink_bw": 1000},
               "h2": {"cpu_freq": [3.6, 3.4], ...}, ...}}

    A value is a positive number (constant over time) or a non-empty list of positive numbers:
    the value in exchange period p is ``list[p % len(list)]`` (a repeating load pattern, e.g. a
    CPU share that drops every other period).  Every problem (bad JSON, unknown feature, a node
    missing a feature the others have, non-positive or non-numeric values, weights for
    features no node has, negative weights) raises :class:`ProfileError` with one line that
    names the file and the node / feature.

Normalization  [decision, docs/design.md §7 step 2]
    docs/design.md §7 step 2 takes, for each feature, the highest value x_max, the mean x_mean and
    the lowest value x_min "of the values of each node's feature over the historic exchange
    periods" and normalizes with them; its formula was lost.  Decision:

        x' = (x − x_mean) / (x_max − x_min),    x' = 0 when x_max = x_min

    where x is the node's value in the **latest** recorded period and the statistics are taken
    over **all nodes and all recorded periods** of the history (one x_max/x_mean/x_min per
    feature).  Pooling over nodes is what makes the statistics useful: a per-node history of a
    static profile would have x_max = x_min and normalize every node to 0, leaving nothing to
    cluster.  The result lies in [−1, 1] and is dimensionless, so GHz and Mbit/s compare.
    ``window`` limits the history to the last W periods (``None`` = every period).

Weights
    The node vector is v_f = w_f · x'_f.  k-means uses Euclidean distance, so a weight w_f
    multiplies feature f's share of the squared distance by w_f²; w_f = 0 ignores the feature.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topo.models import natural_key

__all__ = [
    "FEATURES",
    "FeatureHistory",
    "NodeProfile",
    "ProfileError",
    "load_profile",
    "mininet_limits",
    "node_vectors",
    "normalize",
    "profile_from_dict",
]

#: Known features in canonical order (the column order of every feature matrix).
FEATURES: tuple[str, ...] = (
    "cpu_freq", "cpu_share", "memory", "gpu_freq", "gpu_memory", "disk_io", "uplink_bw",
)


class ProfileError(ValueError):
    """A node profile is invalid; the message names the file and the node or feature."""


@dataclass(frozen=True)
class NodeProfile:
    """Validated node profile: ``values[node][feature]`` is the per-period pattern."""

    name: str
    nodes: tuple[str, ...]  # natural name order
    features: tuple[str, ...]  # canonical FEATURES order, only those present
    values: Mapping[str, Mapping[str, tuple[float, ...]]]
    weights: Mapping[str, float]

    def sample(self, period: int) -> np.ndarray:
        """Feature matrix (n_nodes, n_features), float64, of exchange period ``period``."""
        if period < 0:
            raise ValueError(f"period must be >= 0, got {period}")
        out = np.empty((len(self.nodes), len(self.features)))
        for i, node in enumerate(self.nodes):
            for j, feat in enumerate(self.features):
                pattern = self.values[node][feat]
                out[i, j] = pattern[period % len(pattern)]
        return out

    def weight_vector(self) -> np.ndarray:
        """Weights in ``features`` order (1.0 where the profile gives none)."""
        return np.array([self.weights.get(f, 1.0) for f in self.features])

    def history(self, periods: int, window: int | None = None) -> FeatureHistory:
        """The history after collecting periods ``0 … periods−1`` from the profile."""
        h = FeatureHistory(self.nodes, self.features, window)
        for p in range(periods):
            h.record(self.sample(p))
        return h


def _positive_number(v: Any) -> bool:
    return (not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)
            and v > 0)


def profile_from_dict(data: Any, where: str = "<profile>") -> NodeProfile:
    """Validate a parsed profile file; errors are :class:`ProfileError` naming ``where``."""

    def fail(msg: str) -> ProfileError:
        return ProfileError(f"{where}: {msg}")

    if not isinstance(data, Mapping):
        raise fail("top level must be an object with a 'nodes' object")
    unknown_keys = sorted(set(data) - {"name", "nodes", "weights"})
    if unknown_keys:
        raise fail(f"unknown top-level key {unknown_keys[0]!r} (expected name, nodes, weights)")
    nodes = data.get("nodes")
    if not isinstance(nodes, Mapping) or not nodes:
        raise fail("'nodes' must be a non-empty object mapping node names to features")
    values: dict[str, dict[str, tuple[float, ...]]] = {}
    for node, feats in nodes.items():
        if not isinstance(node, str) or not node:
            raise fail(f"node names must be non-empty strings, got {node!r}")
        if not isinstance(feats, Mapping) or not feats:
            raise fail(f"node {node!r}: features must be a non-empty object")
        values[node] = {}
        for feat, v in feats.items():
            if feat not in FEATURES:
                raise fail(f"node {node!r}: unknown feature {feat!r} "
                           f"(known: {', '.join(FEATURES)})")
            pattern = v if isinstance(v, list) else [v]
            if not pattern or not all(_positive_number(x) for x in pattern):
                raise fail(f"node {node!r}: feature {feat!r} must be a positive number or a "
                           f"non-empty list of positive numbers, got {v!r}")
            if feat == "cpu_share" and any(x > 1 for x in pattern):
                raise fail(f"node {node!r}: cpu_share is a fraction of the machine, must be "
                           f"<= 1, got {v!r}")
            values[node][feat] = tuple(float(x) for x in pattern)
    order = sorted(values, key=natural_key)
    first = order[0]
    present = set(values[first])
    for node in order[1:]:
        if set(values[node]) != present:
            missing = sorted(present - set(values[node]), key=FEATURES.index)
            extra = sorted(set(values[node]) - present, key=FEATURES.index)
            if missing:
                raise fail(f"node {node!r}: missing feature {missing[0]!r} (node {first!r} has it)")
            raise fail(f"node {node!r}: feature {extra[0]!r} is not given for node {first!r}")
    features = tuple(f for f in FEATURES if f in present)
    weights_in = data.get("weights", {})
    if not isinstance(weights_in, Mapping):
        raise fail("'weights' must be an object mapping feature names to numbers")
    weights: dict[str, float] = {}
    for feat, w in weights_in.items():
        if feat not in features:
            raise fail(f"weights: feature {feat!r} is not given for the nodes "
                       f"(they have: {', '.join(features)})")
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise fail(f"weights: feature {feat!r} must have a number >= 0, got {w!r}")
        weights[feat] = float(w)
    if weights and not any(weights.get(f, 1.0) > 0 for f in features):
        raise fail("weights: every feature has weight 0, nothing would describe the nodes")
    name = data.get("name", Path(where).stem if where != "<profile>" else "profile")
    return NodeProfile(str(name), tuple(order), features, values, weights)


def load_profile(path: str | Path) -> NodeProfile:
    """Read and validate a profile file; any problem → :class:`ProfileError` naming the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read node profile ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}:{exc.lineno}:{exc.colno}: bad JSON ({exc.msg})") from None
    return profile_from_dict(data, str(path))


def mininet_limits(profile: NodeProfile, period: int = 0) -> dict[str, dict[str, float]]:
    """Per node, the Mininet host/link options the profile implies in ``period``:
    ``{"cpu": cpu_share}`` for ``CPULimitedHost`` and ``{"bw": uplink_bw}`` (Mbit/s) for the
    node's access ``TCLink`` -- only the keys whose feature the profile has."""
    out: dict[str, dict[str, float]] = {}
    for node in profile.nodes:
        opts: dict[str, float] = {}
        for feat, key in (("cpu_share", "cpu"), ("uplink_bw", "bw")):
            if feat in profile.features:
                pattern = profile.values[node][feat]
                opts[key] = pattern[period % len(pattern)]
        out[node] = opts
    return out


class FeatureHistory:
    """Feature matrices collected once per exchange period (the last ``window`` are kept)."""

    def __init__(self, nodes: Sequence[str], features: Sequence[str],
                 window: int | None = None) -> None:
        if window is not None and window < 1:
            raise ValueError(f"history window must be >= 1 period, got {window}")
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature {unknown[0]!r}")
        self.nodes = tuple(nodes)
        self.features = tuple(features)
        self.window = window
        self._periods: deque[np.ndarray] = deque(maxlen=window)

    def __len__(self) -> int:
        return len(self._periods)

    def record(self, matrix: np.ndarray | Sequence[Sequence[float]]) -> None:
        """Append one period's (n_nodes, n_features) matrix."""
        m = np.array(matrix, dtype=np.float64)
        shape = (len(self.nodes), len(self.features))
        if m.shape != shape:
            raise ValueError(f"feature matrix must have shape {shape}, got {m.shape}")
        if not np.all(np.isfinite(m)):
            raise ValueError("feature values must be finite")
        self._periods.append(m)

    def stack(self) -> np.ndarray:
        """All kept periods as one array (periods, n_nodes, n_features)."""
        if not self._periods:
            raise ValueError("the feature history is empty: record at least one period")
        return np.stack(list(self._periods))

    def latest(self) -> np.ndarray:
        return self.stack()[-1]


def normalize(current: np.ndarray, history: np.ndarray) -> np.ndarray:
    """x' = (x − x_mean)/(x_max − x_min) per feature, 0 where x_max = x_min (module docstring).

    ``current`` is (n_nodes, n_features); ``history`` is any array whose last axis is the
    features (e.g. (periods, n_nodes, n_features)); the statistics pool all other axes.
    """
    current = np.asarray(current, dtype=np.float64)
    hist = np.asarray(history, dtype=np.float64)
    if hist.size == 0:
        raise ValueError("cannot normalize with an empty history")
    if current.shape[-1] != hist.shape[-1]:
        raise ValueError(f"current values have {current.shape[-1]} features, "
                         f"history has {hist.shape[-1]}")
    flat = hist.reshape(-1, hist.shape[-1])
    hi, lo, mean = flat.max(axis=0), flat.min(axis=0), flat.mean(axis=0)
    span = hi - lo
    out = np.zeros_like(current)
    ok = span > 0
    out[..., ok] = (current[..., ok] - mean[ok]) / span[ok]
    return out


def node_vectors(history: FeatureHistory, weights: Sequence[float] | np.ndarray | None = None
                 ) -> np.ndarray:
    """The weighted, normalized vector of every node (n_nodes, n_features): w_f · x'_f of the
    latest period, statistics over the whole kept history."""
    stack = history.stack()
    x = normalize(stack[-1], stack)
    if weights is None:
        return x
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(history.features),):
        raise ValueError(f"need one weight per feature ({len(history.features)}), got {w.shape}")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite and >= 0")
    return x * w
