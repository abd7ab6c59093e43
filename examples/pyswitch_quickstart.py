#!/usr/bin/env python3
"""pyswitch in process: compile a P4 program, install a table entry, send frames through.

    python examples/pyswitch_quickstart.py

No root, no network, no BMv2: the switch is a Python object (docs/pyswitch-api.md). The
program is examples/l2_switch.p4: a destination MAC -> port table, unknown ones dropped.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere in the repository, without installing

from pyswitch import Switch, compile_p4  # noqa: E402
from pyswitch.values import mac  # noqa: E402


def frame(dst: str, src: str = "00:00:00:00:00:01") -> bytes:
    """An Ethernet frame (type 0x88b5, local experimental) with a small payload."""
    return mac(dst).to_bytes(6, "big") + mac(src).to_bytes(6, "big") + b"\x88\xb5" + b"hello"


def main() -> int:
    prog = compile_p4(ROOT / "examples" / "l2_switch.p4")
    sw = Switch(prog)
    sw.insert_entry("MyIngress.l2", {"hdr.ethernet.dstAddr": mac("00:00:00:00:00:02")},
                    "MyIngress.set_port", {"port": 2})
    for dst in ("00:00:00:00:00:02", "00:00:00:00:00:09"):
        out = sw.process(1, frame(dst))  # [(egress port, frame bytes), ...]; drops: []
        print(f"frame to {dst} on port 1 -> {[port for port, _ in out] or 'dropped'}")
    print(f"rx counter of port 1: {sw.counter_read('MyIngress.rx', 1)[0]} packets")
    print(f"entries of MyIngress.l2: {len(sw.read_entries('MyIngress.l2'))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
