"""``python -m controller clean``: remove what a killed run left behind (root).

A run stops its network in a ``finally`` (:meth:`controller.experiment.runner.Run.network`), but SIGKILL,
a power cut or a crashed interpreter skip that.  What may then remain, and what this removes
(the equivalent of Mininet's ``mn -c`` for what our runs start, docs/design.md §8):

* processes: Mininet's host shells (``bash ... mininet:<host>``), our switches
  (``python -m pyswitch run``, :mod:`workers.ndn.router_node` on NDN routers) and node
  processes (``python -m workers....``), and ``simple_switch_grpc`` for ``--target bmv2``;
* interfaces: Mininet's veths (``<node>-eth<N>``, both ends) and the Linux bridges of
  ``--method bcube``/the NDN TCP baseline (named after a topology's switches, see
  :mod:`topo.models`);
* the namespaces and veths the root tests make (``tests/netns.py``: ``t<tag>h<i>``,
  ``t<tag>p<i>``, and ``m...`` for the Mininet switch test).

Nothing else is touched: a process is matched by its own command line, an interface by a
name only our code gives.  ``--dry-run`` lists what would go.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import ExperimentError

__all__ = ["Leftovers", "find_leftovers", "is_our_process", "cmd_clean", "add_clean_parser"]

MININET_IF = re.compile(r"^[A-Za-z][\w]*-eth\d+$")
BRIDGE = re.compile(r"^(edge|agg|core|leaf|spine)\d+$|^bc\d+_\d+$|^(left|right)$")
TEST_NETNS = re.compile(r"^[tm]\d+h\d+$")
TEST_VETH = re.compile(r"^[tm]\d+p\d+$")
OUR_MODULES = ("pyswitch", "workers.")


def is_our_process(argv: list[str]) -> bool:
    """Does this command line belong to a run of ours (module docstring)?"""
    if not argv:
        return False
    if any(a.startswith("mininet:") for a in argv):  # Mininet's host and switch shells
        return True
    if Path(argv[0]).name == "simple_switch_grpc":
        return True
    for i, a in enumerate(argv[:-1]):
        if a == "-m" and "python" in Path(argv[0]).name:
            mod = argv[i + 1]
            return mod == "pyswitch" or mod.startswith(OUR_MODULES)
    return False


@dataclass
class Leftovers:
    processes: dict[int, str] = field(default_factory=dict)  # pid -> command line
    interfaces: list[str] = field(default_factory=list)
    bridges: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.processes or self.interfaces or self.bridges or self.namespaces)


def _processes() -> dict[int, list[str]]:
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "cmdline").read_bytes()
        except OSError:
            continue
        out[int(d.name)] = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return out


def _links() -> dict[str, str]:
    """Interface name -> kind (``veth``, ``bridge``, ... or '') in the root namespace."""
    proc = subprocess.run(["ip", "-d", "-o", "link", "show"], capture_output=True, text=True)
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) < 3:
            continue
        name = parts[1].strip().split("@")[0]
        kind = next((k for k in ("veth", "bridge") if f" {k} " in f" {parts[2]} "), "")
        out[name] = kind
    return out


def _namespaces() -> list[str]:
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def find_leftovers(processes: dict[int, list[str]] | None = None,
                   links: dict[str, str] | None = None,
                   namespaces: list[str] | None = None) -> Leftovers:
    """What :func:`cmd_clean` would remove (the arguments replace the system's listings)."""
    me = {os.getpid(), os.getppid()}
    processes = _processes() if processes is None else processes
    links = _links() if links is None else links
    namespaces = _namespaces() if namespaces is None else namespaces
    found = Leftovers()
    for pid, argv in sorted(processes.items()):
        if pid not in me and is_our_process(argv):
            found.processes[pid] = " ".join(argv)
    for name, kind in sorted(links.items()):
        if MININET_IF.match(name) or TEST_VETH.match(name):
            found.interfaces.append(name)
        elif kind == "bridge" and BRIDGE.match(name):
            found.bridges.append(name)
    found.namespaces = sorted(n for n in namespaces if TEST_NETNS.match(n))
    return found


def _kill(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.05)


def cmd_clean(args: argparse.Namespace) -> int:
    if os.geteuid() != 0 and not args.dry_run:
        raise ExperimentError("clean removes interfaces and processes of root: run it as root "
                              "(or with --dry-run)")
    found = find_leftovers()
    if found.empty():
        print("nothing to clean")
        return 0
    for pid, cmd in found.processes.items():
        print(f"process {pid}: {cmd[:100]}")
    for kind, names in (("interface", found.interfaces), ("bridge", found.bridges),
                        ("namespace", found.namespaces)):
        for n in names:
            print(f"{kind} {n}")
    if args.dry_run:
        return 0
    _kill(list(found.processes))
    for name in found.interfaces + found.bridges:  # deleting one veth end removes both
        subprocess.run(["ip", "link", "del", name], capture_output=True)
    for ns in found.namespaces:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    left = find_leftovers()
    print(f"removed {len(found.processes)} processes, {len(found.interfaces)} interfaces, "
          f"{len(found.bridges)} bridges, {len(found.namespaces)} namespaces"
          + ("" if left.empty() else f"; still there: {left}"))
    return 0


def add_clean_parser(sub: Any, add_subcommand: Any) -> None:
    p = add_subcommand(sub, "clean", cmd_clean,
                       "remove processes, interfaces and namespaces a killed run left (root)")
    p.add_argument("--dry-run", action="store_true", help="list them, remove nothing")
