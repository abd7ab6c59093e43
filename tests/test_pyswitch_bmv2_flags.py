"""pyswitch's command lines as BMv2's launchers write them (issue 30): every flag of
p4c-bm2-ss and simple_switch(_grpc) that the tutorials and p4-utils pass is accepted; the
BMv2 JSON the Thrift server describes a program with; pcap files (written, then read back
with Scapy) and the per-packet trace of ``--log-level trace``."""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.all import IP, UDP, Ether, rdpcap  # noqa: E402 (scapy's star module)

from pyswitch import compile_p4
from pyswitch.daemon import build_parser, check_bmv2_options
from pyswitch.errors import UsageError
from pyswitch.observe import TRACE, ObservedPort, PcapWriter, install_trace, pcap_paths
from pyswitch.ports import PortCounters
from pyswitch.switch import Switch
from pyswitch.thriftapi.bmv2_json import describe, key_target, table_match_type

REPO = Path(__file__).resolve().parent.parent
P4 = REPO / "tests" / "p4"


def _run_args(line: str):
    argv = [a for a in shlex.split(line) if a != "--"]
    args = build_parser().parse_args(argv)
    check_bmv2_options(args)
    return args


def test_tutorials_switch_command_line_is_accepted(tmp_path):
    """The exact command line p4lang/tutorials' P4RuntimeSwitch builds (utils/
    p4runtime_switch.py), flags in its order, target options after ``--``."""
    pcaps = tmp_path / "pcaps"
    pcaps.mkdir()
    line = (f"-i 1@s1-eth1 -i 2@s1-eth2 --pcap {pcaps} --nanolog ipc:///tmp/bm-0-log.ipc "
            f"--device-id 0 build/basic.json --log-console --thrift-port 9090 "
            f"-- --grpc-server-addr 0.0.0.0:50051 --cpu-port 255 --priority-queues 8")
    a = _run_args(line)
    assert (a.pcap, a.config, a.thrift_port, a.grpc_server_addr, a.cpu_port) == \
        (str(pcaps), "build/basic.json", 9090, "0.0.0.0:50051", 255)
    assert a.interface == ["1@s1-eth1", "2@s1-eth2"] and a.log_console


@pytest.mark.parametrize("flags", [
    "--nanolog ipc:///tmp/x.ipc", "--notifications-addr ipc:///tmp/n.ipc", "--debugger",
    "--debugger-addr ipc:///tmp/d.ipc", "--log-file /tmp/x.log --log-flush",
    "--log-level trace", "-L debug", "--priority-queues 8", "--restore-state /tmp/s",
    "--dump-packet-data 64", "--max-port-count 64", "--drop-port 511", "--enable-swap",
    "--pcap", "--grpc-server-ssl", "--dp-grpc-server-addr 0.0.0.0:50052",
])
def test_bmv2_run_flags_are_accepted(flags):
    _run_args(f"{flags} prog.json")


def test_pcap_without_dir_means_current_directory_and_keeps_the_program():
    a = _run_args("prog.json --pcap")
    assert (a.pcap, a.config) == (".", "prog.json")


def test_pcap_swallowing_the_program_gives_it_back(tmp_path):
    prog = tmp_path / "prog.json"
    prog.write_text("{}")
    a = _run_args(f"--pcap {prog}")
    assert (a.pcap, a.config) == (".", str(prog))


@pytest.mark.parametrize("line, words", [
    ("--pcap /nonexistent-dir prog.json", ("/nonexistent-dir", "--pcap")),
    ("--drop-port 7 prog.json", ("--drop-port", "511")),
    ("--dump-packet-data -1 prog.json", ("--dump-packet-data",)),
    ("--log-level verbose prog.json", ("log-level",)),
    ("--thrift-port 70000 prog.json", ("70000",)),
])
def test_bad_bmv2_run_flags_are_refused_in_one_line(line, words):
    with pytest.raises(UsageError) as info:
        _run_args(line)
    assert all(w in str(info.value) for w in words)


def _compile(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyswitch", "compile", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_tutorials_compile_command_line(tmp_path):
    """utils/Makefile: ``$(P4C) --p4v 16 --p4runtime-files build/X.p4.p4info.txtpb -o
    build/X.json X.p4`` -- plus p4c's other flags, and P4Info formats by file name."""
    (tmp_path / "build").mkdir()
    src = str(P4 / "rt_state.p4")
    r = _compile("--p4v", "16", "--p4runtime-files", "build/rt_state.p4.p4info.txtpb",
                 "-o", "build/rt_state.json", "--emit-externs", "--std", "p4_16",
                 "--target", "bmv2", "--arch", "v1model", "--Wdisable", src, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "tables {" in (tmp_path / "build/rt_state.p4.p4info.txtpb").read_text()
    r = _compile("--p4runtime-files", "a.json,a.bin", "-o", "x.json", src, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a.json").read_text().lstrip().startswith("{")
    from p4.config.v1 import p4info_pb2

    info = p4info_pb2.P4Info()
    info.ParseFromString((tmp_path / "a.bin").read_bytes())
    assert [t.preamble.name for t in info.tables] == ["MyIngress.acl"]


@pytest.mark.parametrize("flag, value", [("--p4v", "14"), ("--target", "tofino"),
                                         ("--arch", "psa")])
def test_compile_refuses_what_it_cannot_do(tmp_path, flag, value):
    r = _compile(flag, value, "-o", "x.json", str(P4 / "rt_state.p4"), cwd=tmp_path)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert value in r.stderr and not (tmp_path / "x.json").exists()


def test_p4c_driver_entry_point_takes_an_output_directory(tmp_path):
    from pyswitch.compile_cli import main

    out = tmp_path / "out"
    out.mkdir()
    assert main([str(P4 / "rt_state.p4"), "-o", str(out)], driver=True) == 0
    assert (out / "rt_state.json").is_file()


# ---------------------------------------------------------------- BMv2 JSON description

def test_bmv2_json_names_as_p4c_lays_them_out():
    assert key_target("hdr.ethernet.dstAddr") == ["ethernet", "dstAddr"]
    assert key_target("hdr.ipv4.$valid$") == ["ipv4", "$valid$"]
    assert key_target("meta.routing.nhop") == ["scalars", "routing.nhop"]
    assert key_target("hdr.inner.ipv4.ttl") == ["inner.ipv4", "ttl"]
    assert table_match_type(["exact", "lpm"]) == "lpm"
    assert table_match_type(["exact", "optional"]) == "ternary"
    assert table_match_type(["lpm", "ternary", "range"]) == "range"
    assert table_match_type(["exact"]) == "exact"


def test_bmv2_json_of_rt_state():
    prog = compile_p4(P4 / "rt_state.p4")
    j = describe(prog.meta, "rt_state")
    (t,) = j["pipelines"][0]["tables"]
    assert (t["name"], t["match_type"], t["with_counters"]) == ("MyIngress.acl", "ternary", True)
    assert [k["target"] for k in t["key"]] == [["ethernet", "etherType"],
                                              ["ethernet", "dstAddr"]]
    assert {h["name"]: h["header_type"] for h in j["headers"]} == {"ethernet": "ethernet_t"}
    assert j["header_types"][0]["fields"] == [["etherType", 16, False],
                                              ["dstAddr", 48, False]]
    assert [(a["name"], a["runtime_data"]) for a in j["actions"]] == [
        ("MyIngress.set_port", [{"name": "port", "bitwidth": 9}]), ("MyIngress.nop", [])]
    assert j["register_arrays"] == [{"name": "MyIngress.store", "id": 0, "size": 16,
                                     "bitwidth": 32}]
    assert [(c["name"], c["is_direct"]) for c in j["counter_arrays"]] == [
        ("MyIngress.port_pkts", False), ("MyIngress.acl_hits", True)]


# ---------------------------------------------------------------- pcap files

class _FakePort:
    """Stands in for pyswitch.ports.Port: frames to receive, frames sent."""

    def __init__(self, ifname: str, incoming: list[bytes]) -> None:
        self.ifname = ifname
        self.counters = PortCounters()
        self.incoming = incoming
        self.sent: list[bytes] = []
        self.closed = False

    def recv_batch(self, limit: int = 64) -> list[bytes]:
        out, self.incoming = self.incoming[:limit], self.incoming[limit:]
        return out

    def send(self, frame: bytes) -> bool:
        self.sent.append(frame)
        return True

    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        self.closed = True


def _frame(i: int, size: int = 0) -> bytes:
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
                 IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1000 + i, dport=2000) /
                 (b"x" * size))


def test_pcap_files_per_port_read_back_with_scapy(tmp_path):
    rx = [_frame(0), _frame(1, 1400), _frame(2)]
    port = ObservedPort(_FakePort("s1-eth1", list(rx)), 1, str(tmp_path), 0)
    assert port.recv_batch(2) == rx[:2] and port.recv_batch(8) == rx[2:]
    port.send(_frame(7, 60))
    # flushed per frame: readable while the switch runs
    pin, pout = pcap_paths(str(tmp_path), "s1-eth1")
    assert (Path(pin).name, Path(pout).name) == ("s1-eth1_in.pcap", "s1-eth1_out.pcap")
    assert [bytes(p) for p in rdpcap(pin)] == rx
    assert [p[UDP].sport for p in rdpcap(pout)] == [1007]
    port.close()
    assert port.port.closed


def test_pcap_keeps_original_length_of_a_frame_beyond_snaplen(tmp_path):
    w = PcapWriter(str(tmp_path / "big.pcap"))
    w.write(b"\x00" * 70000, stamp=1.5)
    w.close()
    data = (tmp_path / "big.pcap").read_bytes()
    import struct

    sec, usec, incl, orig = struct.unpack_from("<IIII", data, 24)
    assert (sec, usec, incl, orig) == (1, 500000, 65535, 70000)


def test_dump_packet_data_logs_the_first_bytes(caplog):
    port = ObservedPort(_FakePort("p1", [b"\x01\x02\x03\x04\x05"]), 3, None, 2)
    with caplog.at_level(logging.INFO, logger="pyswitch.packets"):
        port.recv_batch()
        port.send(b"\xaa\xbb\xcc")
    assert [r.getMessage() for r in caplog.records] == [
        "Packet data received on port 3 (5 bytes): 0102",
        "Packet data sent out of port 3 (3 bytes): aabb"]


# ---------------------------------------------------------------- per-packet trace

def test_trace_tells_parser_tables_actions_and_egress(caplog):
    sw = install_trace(Switch(compile_p4(P4 / "rt_state.p4")))
    sw.insert_entry("MyIngress.acl", {"hdr.ethernet.etherType": (0x0800, 0xFFFF),
                                      "hdr.ethernet.dstAddr": 2},
                    "MyIngress.set_port", {"port": 3}, priority=10)
    frame = bytes.fromhex("000000000002" "000000000001" "0800") + b"\x00" * 46
    with caplog.at_level(TRACE, logger="pyswitch.trace"):
        out = sw.process(1, frame)
        sw.process(2, bytes.fromhex("000000000009" "000000000001" "0806") + b"\x00" * 46)
    assert out == [(3, frame)]
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:8] == [
        "[0] Processing packet received on port 1 (60 bytes)",
        "[0] Parser: extracted ethernet_t; 14 bytes parsed, parser error NoError",
        "[0] Pipeline 'ingress': start",
        "[0] Table 'MyIngress.acl': hit with handle 0",
        "[0] Action entry is MyIngress.set_port - port=0x3",
        "[0] Pipeline 'ingress': end; egress_spec 3, mcast_grp 0",
        "[0] Egress port is 3 (instance type 0)",
        "[0] Pipeline 'egress': start",
    ]
    assert "[0] Transmitting packet of size 60 out of port 3" in lines
    assert "[1] Table 'MyIngress.acl': miss" in lines
    assert "[1] Action entry is MyIngress.nop - " in lines
    # the trace is on this switch only: a fresh switch's tables are the plain ones
    plain = Switch(compile_p4(P4 / "rt_state.p4"))
    assert type(plain.ns[plain.meta["tables"][0]["var"]]).__name__ == "Table"


@pytest.mark.parametrize(("line", "grpc_by_default", "grpc", "thrift"), [
    ("prog.json", True, "127.0.0.1:9559", "127.0.0.1"),  # by hand: loopback only
    ("--listen-all prog.json", True, "0.0.0.0:9559", "0.0.0.0"),
    ("prog.json", False, None, "127.0.0.1"),  # pyswitch-simple-switch: no P4Runtime
    ("--listen-all prog.json", False, None, "0.0.0.0"),
    ("-- --grpc-server-addr 0.0.0.0:50051 prog.json", True, "0.0.0.0:50051", "127.0.0.1"),
    ("--thrift-addr 10.1.2.3 --listen-all prog.json", True, "0.0.0.0:9559", "10.1.2.3"),
])
def test_servers_listen_on_loopback_unless_asked(line, grpc_by_default, grpc, thrift):
    """Issue 43: P4Runtime and Thrift listen on 127.0.0.1 unless an address or --listen-all
    is given (launchers pass theirs: the tutorials' 0.0.0.0:50051 is kept)."""
    from pyswitch.daemon import set_listen_addresses

    a = _run_args(line)
    set_listen_addresses(a, grpc_by_default)
    assert (a.grpc_server_addr, a.thrift_addr) == (grpc, thrift)


def _listening(port: int) -> set[str]:
    """The IPv4 addresses a TCP socket listens on at `port` (/proc/net/tcp, state 0A)."""
    found = set()
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = row.split()[1], row.split()[3]
        host, p = local.split(":")
        if state == "0A" and int(p, 16) == port:
            found.add(".".join(str(b) for b in bytes.fromhex(host)[::-1]))
    return found


@pytest.mark.parametrize(("flags", "bound"), [([], "127.0.0.1"), (["--listen-all"], "0.0.0.0")])
def test_the_thrift_server_binds_loopback_by_default(flags, bound):
    """The real daemon's Thrift socket, as the kernel reports it."""
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        tport = s.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gport = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "pyswitch", "run", "--no-p4",
                             "--thrift-port", str(tport), *flags,
                             "--grpc-server-addr", f"127.0.0.1:{gport}"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _listening(tport) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert _listening(tport) == {bound}
    finally:
        proc.terminate()
        proc.wait(10)
