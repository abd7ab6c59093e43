"""Hostile frames over real ports while an honest INA job trains (issue 20 item 3; docs/design.md
§9), reduced: ``bench/hostile_frames.py`` on a leaf-spine with 2 leaves of 3 hosts (PS h0 and
workers h1, h2 on leaf0, worker h3 on leaf1), 1 Mbit/s links, logreg.  The attacker is h4,
a spare host on leaf1 next to worker h3: a few hundred truncated, oversized, bit-flipped and
random frames and INA frames that lie, from its own namespace on a raw socket (and two jumbo
frames its kernel refuses); and a few dozen
datagrams from inside the PS's and h3's namespaces to their own INA sockets.

Checked by the bench itself (``doc["checks"]``): every round exact and completed, every
switch alive without processing errors, every frame that entered the ToR either forwarded
(counted by sniffers on the ToR's links) or counted by exactly the drop counter ina.p4 run
in-process predicts, and the PS's and h3's discard counters equal to what was sent them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]

FRAMES = 400


def test_hostile_frames_from_a_spare_host_are_dropped_and_counted_while_the_job_stays_exact(
        tmp_path):
    from hostile_frames import HostileSettings, run_bench

    doc = run_bench(HostileSettings(topo="leafspine:2,1,3", workers="3", budget=1,
                                    model="logreg", frames=FRAMES, host_frames=60,
                                    baseline_rounds=4, out=str(tmp_path), name="hostile"))
    net, st = doc["network"], doc["settings"]
    failed = [k for k, ok in doc["checks"].items() if not ok]
    assert not failed, (failed, net, doc["host"], doc["attacked"])
    assert (st["attacker"], st["tor"], st["host_target_worker"]) == ("h4", "leaf1", "h3")
    assert net["sent"] >= FRAMES
    assert {k.split(":")[0] for k in net["per_kind"]} == {
        "truncated", "oversized", "bitflip", "random", "lie", "jumbo"}
    # more than a veth carries: the attacker's own kernel refuses it, nothing reaches the ToR
    jumbo = net["per_kind"]["jumbo"]
    assert jumbo["refused"] == jumbo["generated"] >= 1 and jumbo["sent"] == 0
    # a lie is well formed: the trust boundary (a non-member host port) drops it
    lies = {k: r for k, r in net["per_kind"].items() if k.startswith("lie:")}
    assert len(lies) >= 6
    assert all(set(r["fate"]) == {"dropped_nonmember"} for r in lies.values() if r["sent"])
    drops = net["tor_drops_measured"]
    for reason in ("dropped_malformed", "dropped_nonmember", "dropped_not_ipv4"):
        assert drops[reason] > 0, drops
    # the PS and the worker counted what they refused, by reason
    ps = doc["host"]["ps"]["outcomes"]
    assert ps["malformed_datagrams"]["measured"] > 0
    assert any(k.startswith("malformed:") and r["measured"] > 0 for k, r in ps.items())
    assert doc["host"]["h3"]["outcomes"]["malformed"]["measured"] > 0
    saved = json.loads((tmp_path / "hostile" / "hostile.json").read_text())
    assert saved["ok"] is True and saved["checks"] == doc["checks"]
