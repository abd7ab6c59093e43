"""Network `Target` for the packet tests: a real switch process on veths, over P4Runtime.

It runs any program with ina.p4's plain-IPv4 route (``MyIngress.ipv4_lpm`` with
``MyIngress.ipv4_forward(dstAddr, port)``, counting nothing on a hit), which the probe below
uses: p4src/ina.p4 (tests/test_ina_p4.py) and p4src/switchml.p4 (tests/test_switchml_p4.py).

`NetSwitchTarget` runs ``python -m pyswitch run`` (target kind ``pyswitch-net``) or BMv2's
``simple_switch_grpc`` (kind ``bmv2``) with one veth per switch port; the host end of each
veth sits in its own network namespace (tests/netns.py) where the harness holds a raw
socket. Tables, default actions and multicast groups are written with the project's
P4Runtime client (controller/dataplane/p4runtime_client.py); counters (and, on pyswitch, registers)
are read with it too.

**Collecting "everything that comes out".** A frame may produce zero, one or several frames
on any port, so the harness needs to know when the switch is done with it. Waiting for a
quiet period after every frame would cost ~50 ms x ~2000 frames per run. Instead, right
after the frame under test the harness sends a *probe* on the same host port: a plain IPv4
datagram to `PROBE_IP` that an ``ipv4_lpm`` /32 entry (installed on every reset) sends out
of `PROBE_PORT`, carrying a fresh sequence number. Both frames sit in the same receive queue
of the same switch port, so the switch processes the probe after the frame; once the probe
has come out, the frame's outputs have been transmitted. Then the harness keeps listening
until no frame arrived for ``settle`` seconds (BMv2 runs several egress threads, so its
outputs on different ports are not ordered with the probe: its settle time is longer).

What keeps this honest (no output can slip past unnoticed):

* Before every send the host sockets are drained; a frame found there arrived after the
  previous frame's settle window and fails the test ("late frame").
* On pyswitch the daemon's control socket is read after every frame: the switch must have
  processed exactly the two frames sent (so the frame under test reached the pipeline), with
  no pipeline exception and no frame sent to a port that has no veth.
* When a test is over, `finish` waits `FINAL_QUIET` seconds for stragglers.

The probe touches no INA counter (plain IPv4 is forwarded by ``ipv4_lpm`` only) and its /32
route is more specific than any prefix the tests install, so it changes nothing the tests
observe apart from one extra ``ipv4_lpm`` entry.

Switch state is reset between tests by deleting the multicast groups (and any clone
sessions) and then pushing the pipeline again (SetForwardingPipelineConfig
VERIFY_AND_COMMIT), which replaces tables, registers and counters; the push alone is not
enough on BMv2, which keeps multicast replicas across it (switch_harness.clear_replication).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import shutil
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netns import HostNs, veth_hosts
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from switch_harness import SwitchProcess, compile_for, reset_switch, start_switch

# Every port the INA tests use: workers 0..8 on 1..9, fabric 20..24, the PS on 30.
TEST_PORTS: tuple[int, ...] = (*range(1, 10), *range(20, 25), 30)
PROBE_PORT = 40
PROBE_IP = "10.255.255.254"
PROBE_MAC = 0x02_00_00_00_FE_ED
_PROBE_MAGIC = b"INSYNC-PROBE"
FINAL_QUIET = 0.1          # seconds of silence required when a test ends
PROBE_TIMEOUT = 5.0        # the probe must be back within this time


@dataclass(frozen=True)
class NetKind:
    """How one network target kind runs: which switch binary, how long outputs may lag
    behind the probe, and whether its P4Runtime server reads registers."""

    switch: str            # switch_harness target: "pyswitch" or "bmv2"
    settle: float          # seconds of silence after the probe
    reads_registers: bool
    control_socket: bool   # pyswitch's daemon counters (processed, errors, unknown ports)


KINDS: dict[str, NetKind] = {
    # pyswitch's forwarding loop is one thread that transmits synchronously in arrival order:
    # the probe is a barrier; the settle only covers kernel delivery across veths.
    "pyswitch-net": NetKind("pyswitch", settle=0.002, reads_registers=True, control_socket=True),
    # simple_switch: one ingress thread but several egress threads (port mod 4) feeding the
    # transmit queue, so outputs may trail the probe by a scheduling quantum or so.
    "bmv2": NetKind("bmv2", settle=0.05, reads_registers=False, control_socket=False),
}


def net_unavailable(kind: str) -> str | None:
    """Why the network target ``kind`` cannot run here, or None."""
    if kind == "bmv2":
        missing = [b for b in ("simple_switch_grpc", "p4c") if shutil.which(b) is None]
        if missing:
            return f"BMv2 target needs {', '.join(missing)} on PATH"
    if os.geteuid() != 0:
        return "network targets need root (namespaces, veths, raw sockets)"
    if shutil.which("ip") is None:
        return "network targets need iproute2's ip"
    return None


def probe_frame(seq: int) -> bytes:
    """The barrier frame: plain IPv4/UDP to PROBE_IP carrying a sequence number."""
    pkt = (Ether(src="02:00:00:00:fe:01", dst="02:00:00:00:fe:02")
           / IP(src="10.255.255.253", dst=PROBE_IP, ttl=64)
           / UDP(sport=9, dport=9) / Raw(_PROBE_MAGIC + struct.pack("!Q", seq)))
    return bytes(pkt)


def probe_seq(frame: bytes) -> int | None:
    """The sequence number of a probe frame, or None if ``frame`` is not a probe."""
    if len(frame) < 20 or frame[-20:-8] != _PROBE_MAGIC:
        return None
    return struct.unpack("!Q", frame[-8:])[0]


class NetSwitchTarget:
    """`Target` (tests/ina_harness.py) on a switch process with veths on `TEST_PORTS` and
    `PROBE_PORT`. Start with `start()`, call `reset()` before each test, `finish()` after
    it, and `close()` at the end."""

    _seq = itertools.count(1)

    def __init__(self, kind: str, p4_path: Path, workdir: Path) -> None:
        self.kind_name, self.kind = kind, KINDS[kind]
        self.p4_path, self.workdir = p4_path, workdir
        self._stack = contextlib.ExitStack()
        self.sw: SwitchProcess | None = None
        self.ports: dict[int, object] = {}           # switch port -> host-side Port
        self._by_fd: dict[int, tuple[int, object]] = {}
        self._ctl: socket.socket | None = None
        self._ctl_file = None
        self._last_switch: dict[str, int] = {}
        self._groups: set[int] = set()

    # -------------------------------------------------------------- lifecycle

    def start(self) -> NetSwitchTarget:
        """Create the veths, start the switch, connect, compile the program."""
        all_ports = (*TEST_PORTS, PROBE_PORT)
        try:
            self.compiled = compile_for(self.kind.switch, self.p4_path, self.workdir / "build")
            hosts: list[HostNs] = self._stack.enter_context(
                veth_hosts(len(all_ports), ips=False))
            sock = str(self.workdir / "ctl.sock") if self.kind.control_socket else None
            self.sw = start_switch(self.kind.switch,
                                   {n: h.switch_if for n, h in zip(all_ports, hosts, strict=True)},
                                   self.workdir, control_socket=sock)
            self._stack.callback(self._stop_switch)
            self.client = self.sw.client(election_id=1)
            for n, h in zip(all_ports, hosts, strict=True):
                port = h.port()
                self._stack.callback(port.close)
                self.ports[n] = port
                self._by_fd[port.fileno()] = (n, port)
            if sock:
                self._ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._stack.callback(self._ctl.close)
                self._ctl.settimeout(5)
                self._ctl.connect(sock)
                self._ctl_file = self._ctl.makefile("rwb")
                self._stack.callback(self._ctl_file.close)
        except BaseException:
            self.close()
            raise
        return self

    def _stop_switch(self) -> None:
        if self.sw is not None:
            self.sw.stop()

    def close(self) -> None:
        self._stack.close()

    def reset(self) -> None:
        """No multicast groups or clone sessions, a fresh pipeline (empty tables, zero
        registers and counters), plus the probe route."""
        reset_switch(self.client, self.compiled, groups=self._groups)
        self._groups.clear()
        self.client.insert_table_entry("MyIngress.ipv4_lpm",
                                       {"hdr.ipv4.dstAddr": (PROBE_IP, 32)},
                                       "MyIngress.ipv4_forward",
                                       {"dstAddr": PROBE_MAC, "port": PROBE_PORT})
        self._drain("before the test (stray frames on the veths)")
        if self.kind.control_socket:
            self._last_switch = self._switch_counters()

    def finish(self) -> None:
        """After a test: nothing may still be on its way out of the switch."""
        late = self._collect_until_quiet(FINAL_QUIET)
        assert not late, (f"{self.kind_name}: {len(late)} frame(s) came out after the test's "
                          f"last send (ports {sorted({p for p, _ in late})})")

    # -------------------------------------------------------------- Target API

    def insert_entry(self, table: str, match: dict, action: str, params: dict) -> None:
        self.client.insert_table_entry(table, match, action, params)

    def set_default_action(self, table: str, action: str, params: dict) -> None:
        self.client.set_default_action(table, action, params)

    def set_multicast_group(self, group_id: int,
                            ports: list[int] | list[tuple[int, int]]) -> None:
        if group_id in self._groups:
            self.client.modify_multicast_group(group_id, ports)
            return
        # recorded first: reset() must delete the id even when this insert fails (a group
        # of that id left on the switch)
        self._groups.add(group_id)
        self.client.insert_multicast_group(group_id, ports)

    def counter(self, name: str) -> int:
        return self.client.read_counter(f"MyIngress.{name}", 0)[0][0]

    def register(self, name: str, index: int) -> int | None:
        if not self.kind.reads_registers:
            return None                     # BMv2's P4Runtime server has no register reads
        return self.client.read_register(f"MyIngress.{name}", index)

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Send ``frame`` into switch port ``port``; every frame that came out, by port
        (arrival order kept within a port)."""
        if port not in TEST_PORTS:
            raise ValueError(f"port {port} has no veth (network target ports: {TEST_PORTS})")
        self._drain("before a send (it came out after the previous frame's settle window)")
        seq = next(self._seq)
        host = self.ports[port]
        assert host.send(frame), f"the kernel refused a {len(frame)}-byte frame on port {port}"
        assert host.send(probe_frame(seq))
        outs: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + PROBE_TIMEOUT
        while not self._read_ready(outs, deadline - time.monotonic(), seq):
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{self.kind_name}: probe {seq} did not come back within {PROBE_TIMEOUT} s "
                    f"(switch alive: {self.sw.alive()}); log tail:\n{self.sw.log()[-2000:]}")
        outs += self._collect_until_quiet(self.kind.settle)
        if self.kind.control_socket:
            self._check_switch(2)
        outs.sort(key=lambda o: o[0])               # stable: per-port order kept
        return outs

    # -------------------------------------------------------------- frame I/O

    def _read_ready(self, outs: list[tuple[int, bytes]], timeout: float,
                    seq: int | None = None) -> bool:
        """Wait up to ``timeout`` for frames, append them to ``outs``; True once probe
        ``seq`` was seen among them."""
        ready, _, _ = select.select(list(self.ports.values()), [], [], max(timeout, 0))
        seen = False
        for p in ready:
            n, sock = self._by_fd[p.fileno()]
            for f in sock.recv_batch(256):
                if n == PROBE_PORT and probe_seq(f) is not None:
                    if probe_seq(f) != seq:
                        raise AssertionError(f"{self.kind_name}: stale probe {probe_seq(f)} "
                                             f"while waiting for {seq}")
                    seen = True
                else:
                    outs.append((n, f))
        return seen

    def _collect_until_quiet(self, quiet: float) -> list[tuple[int, bytes]]:
        outs: list[tuple[int, bytes]] = []
        while True:
            before = len(outs)
            if self._read_ready(outs, quiet, seq=-1):
                raise AssertionError(f"{self.kind_name}: a probe came out twice")
            if len(outs) == before:
                return outs

    def _drain(self, when: str) -> None:
        late: list[tuple[int, bytes]] = []
        for n, p in self.ports.items():
            late += [(n, f) for f in p.recv_batch(256)]
        assert not late, (f"{self.kind_name}: {len(late)} unexpected frame(s) {when}: "
                          f"ports {[n for n, _ in late]}, first {late[0][1][:64].hex()}")

    # -------------------------------------------------------------- pyswitch's own counters

    def _switch_counters(self) -> dict[str, int]:
        self._ctl_file.write(b'{"op": "counters"}\n')
        self._ctl_file.flush()
        answer = json.loads(self._ctl_file.readline())
        assert answer.get("ok"), answer
        return answer["switch"]

    def _check_switch(self, sent: int) -> None:
        """The daemon processed exactly ``sent`` frames, without pipeline exceptions, and
        sent nothing to a port without a veth (such a frame would be invisible here)."""
        now, last = self._switch_counters(), self._last_switch
        self._last_switch = now
        delta = {k: now[k] - last.get(k, 0) for k in ("processed", "process_errors",
                                                      "unknown_port_out",
                                                      "dropped_no_pipeline", "loop_errors")}
        assert delta == {"processed": sent, "process_errors": 0, "unknown_port_out": 0,
                         "dropped_no_pipeline": 0, "loop_errors": 0}, (
            f"{self.kind_name}: switch counters over the last send {delta}; "
            f"log tail:\n{self.sw.log()[-2000:]}")


class NetTargetPool:
    """Switch processes of one kind, started on first use and kept for the test module;
    `get(i)` hands out the i-th switch of a test (tests use at most two), freshly reset."""

    def __init__(self, kind: str, p4_path: Path, workdir: Path) -> None:
        self.kind, self.p4_path, self.workdir = kind, p4_path, workdir
        self.switches: list[NetSwitchTarget] = []

    def get(self, i: int) -> NetSwitchTarget:
        while len(self.switches) <= i:
            d = self.workdir / f"sw{len(self.switches)}"
            d.mkdir(parents=True, exist_ok=True)
            self.switches.append(NetSwitchTarget(self.kind, self.p4_path, d).start())
        sw = self.switches[i]
        sw.reset()
        return sw

    def close(self) -> None:
        for sw in self.switches:
            sw.close()
        self.switches.clear()


@contextlib.contextmanager
def pools_for(p4_path: Path, tmp_path_factory: Any) -> Iterator[Callable[[str], NetTargetPool]]:
    """A test module's switch processes running ``p4_path``: ``get(kind)`` is the
    :class:`NetTargetPool` of that kind, started on first use; every pool is closed at the
    end (the body of a module-scoped fixture)."""
    pools: dict[str, NetTargetPool] = {}

    def get(kind: str) -> NetTargetPool:
        if kind not in pools:
            pools[kind] = NetTargetPool(kind, p4_path, tmp_path_factory.mktemp(kind))
        return pools[kind]

    try:
        yield get
    finally:
        for pool in pools.values():
            pool.close()


__all__ = ["FINAL_QUIET", "KINDS", "PROBE_IP", "PROBE_PORT", "TEST_PORTS", "NetKind",
           "NetSwitchTarget", "NetTargetPool", "net_unavailable", "pools_for", "probe_frame",
           "probe_seq"]
