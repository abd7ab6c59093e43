"""Bad topology input: one clear TopologyError, checked before anything big is built.

Each case is an input a user can type; the error must name what is wrong, and sizes are
refused before the graph (or the LP after it) is built.
"""

from __future__ import annotations

import json

import pytest

from topo.models import MAX_NODES, TopologyError, load_json, parse_topology

SPECS = [
    ("fattree:200", "2,050,000 nodes"),
    ("fattree:1_0_0_0", "whole numbers"),
    ("fattree:٤", "whole numbers"),
    ("fattree:1234567890", "whole numbers"),
    ("bcube:999999999,999999999", "too many nodes"),
    ("bcube:200,3", "nodes, more than the limit"),
    ("leafspine:1000,10,100", "101,010 nodes"),
    ("dumbbell:100000,1", "100,003 nodes"),
    ("fattree:4,abc", "must be numbers"),
    ("fattree:4,1e999", "positive number"),
    ("fattree:4,-1", "positive number"),
    ("fattree:3", "even integer"),
    ("nosuch:1", "expected fattree"),
]


@pytest.mark.parametrize(("spec", "expected"), SPECS)
def test_bad_spec_one_clear_error(spec: str, expected: str) -> None:
    with pytest.raises(TopologyError, match=expected):
        parse_topology(spec)


def test_largest_allowed_fattree_builds() -> None:
    # k=16 is the planner benchmark's largest; it must stay within the limit.
    g = parse_topology("fattree:16")
    assert g.number_of_nodes() == 16**3 // 4 + 5 * 16 * 16 // 4 <= MAX_NODES


def _topo(bw: object) -> dict:
    return {"hosts": ["a", "b"], "switches": ["s"],
            "links": [{"a": "a", "b": "s", "bw": bw}, {"a": "b", "b": "s"}]}


@pytest.mark.parametrize(("content", "expected"), [
    (b"\xff\xfe{not utf-8", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (json.dumps(_topo(10**400)).encode(), "positive number"),
    (json.dumps(_topo(True)).encode(), "positive number"),
    (json.dumps({"hosts": [f"h{i}" for i in range(MAX_NODES + 1)], "switches": [],
                 "links": []}).encode(), "more than the limit"),
    (b'{"hosts": [], "switches": []', "bad JSON"),
    (b'{"hosts": [], "switches": [], "links": [], "x": ' + b"9" * 5000 + b"}", "bad JSON"),
])
def test_bad_file_one_clear_error(tmp_path, content: bytes, expected: str) -> None:
    path = tmp_path / "topo.json"
    path.write_bytes(content)
    with pytest.raises(TopologyError, match=expected) as info:
        load_json(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)
