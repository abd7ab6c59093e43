"""``python -m pyswitch run``: a pyswitch v1model switch on Linux interfaces with P4Runtime.

Command line mirrors BMv2's ``simple_switch_grpc``::

    python -m pyswitch run [-i N@IFACE ...] [--device-id ID] [--grpc-server-addr HOST:PORT]
                           [--cpu-port N] [--no-p4] [--log-console] [--log-file PATH]
                           [--impair PORT|all:loss=..,dup=..,reorder=..,delay_ms=..,seed=..]
                           [--control-socket PATH] [COMPILED.json]

Threads: one forwarding loop (``pyswitch/loop.py``: epoll over the AF_PACKET ports, a
wake-up pipe and the impairment timers) that runs every received frame through the switch (a port's received
batch in one ``Switch.process_batch`` call where no impairment or queue is in the way,
else ``Switch.process`` per frame) -- in Python, or with ``PYSWITCH_LOOP=c`` in C where
every port is on the native path (``portio.c``'s ``Pump``: epoll, ``recvmmsg``, the
switch's batch, ``sendmmsg`` per port, Python entered for packet-in, impairments, queues and
errors; docs/pyswitch-api.md, "The forwarding loop in C"); for P4Runtime,
one ``grpc.aio`` event loop thread and a small pool for blocking requests (see
``pyswitch/p4runtime/server.py``); one thread for the control socket. One lock
(``Device.lock``) guards the switch, the impairment state and the delayed-frame queue; the
loop takes it once per batch of received frames.

Control socket: a UNIX stream socket speaking JSON lines (one request object per line, one
answer per line). Requests: ``{"op": "counters"}``, ``{"op": "get_impairment"}``,
``{"op": "set_impairment", "port": N | "all", "spec": "loss=0.1,seed=3"}`` (keys not given
keep their value; ``"none"`` clears), ``{"op": "ping"}``, ``{"op": "memory", "collect": true,
"pymalloc": true}`` (RSS, live Python blocks, pymalloc arenas, malloc in-use bytes:
``pyswitch/memstats.py``), ``{"op": "tracemalloc", "action": "start" | "diff" | "stop"}``
(leak hunting: what was allocated since ``start`` and is still alive). Answers carry
``"ok": true`` or ``"ok": false, "error": "..."``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

# gRPC's C core logs bind failures etc. to stderr itself; we report them in one line.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from pyswitch.errors import OneLineParser, UsageError  # noqa: E402
from pyswitch.impairment import (  # noqa: E402
    ImpairmentSpecError,
    PortImpairments,
    parse_port_option,
)
from pyswitch.inputfile import (  # noqa: E402
    MAX_DEVICE_CONFIG_BYTES,
    InputFileError,
    read_input,
)
from pyswitch.loop import BATCH, ForwardingLoop, MultiLoop  # noqa: E402,F401 (re-exported)
from pyswitch.memstats import memory_figures, trace  # noqa: E402
from pyswitch.native import mode as native_mode  # noqa: E402
from pyswitch.observe import TRACE, ObservedPort, install_trace  # noqa: E402
from pyswitch.p4runtime.pipeline import (  # noqa: E402
    Device,
    check_limits,
    pin_mmap_threshold,
    program_from_device_config,
)
from pyswitch.p4runtime.server import serve  # noqa: E402
from pyswitch.p4runtime.translate import P4RTError  # noqa: E402
from pyswitch.ports import Port, PortError  # noqa: E402

log = logging.getLogger("pyswitch.run")
BMV2_JSON_VERSION = "2.23"  # the "__meta__" version of the JSON the Thrift server describes


# ---------------------------------------------------------------- control socket

def handle_control(loop: ForwardingLoop, req: Any) -> dict[str, Any]:
    """Answer one control request (pure dispatch; errors become ``ok: false``)."""
    if not isinstance(req, dict):
        return {"ok": False, "error": "request must be a JSON object"}
    op = req.get("op")
    try:
        if op == "ping":
            return {"ok": True}
        if op == "counters":
            return {"ok": True, **loop.counters()}
        if op == "get_impairment":
            return {"ok": True, "impairments": loop.counters()["impairments"]}
        if op == "set_impairment":
            port = req.get("port", "all")
            if port != "all" and not isinstance(port, int):
                return {"ok": False, "error": f"port must be an int or 'all', got {port!r}"}
            loop.set_impairment(None if port == "all" else port, str(req.get("spec", "")))
            return {"ok": True, "impairments": loop.counters()["impairments"]}
        if op == "memory":  # leak hunting and the abuse bench: live objects vs RSS
            return {"ok": True, **memory_figures(collect=bool(req.get("collect")),
                                                 pymalloc=bool(req.get("pymalloc")))}
        if op == "tracemalloc":
            frames, top = req.get("frames", 1), req.get("top", 15)
            if not isinstance(frames, int) or not isinstance(top, int):
                return {"ok": False, "error": "frames and top must be ints"}
            answer = trace(str(req.get("action")), frames, top)
            return {"ok": "error" not in answer, **answer}
    except ImpairmentSpecError as exc:
        return {"ok": False, "error": str(exc)}
    return {"ok": False, "error": f"unknown op {op!r}"}


def serve_control(loop: ForwardingLoop, path: str) -> socket.socket:
    """Listen on UNIX socket ``path`` (replaced if stale) and serve JSON lines on a thread."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)

    def client(conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as f:
            for line in f:
                try:
                    answer = handle_control(loop, json.loads(line))
                except json.JSONDecodeError as exc:
                    answer = {"ok": False, "error": f"bad JSON: {exc}"}
                f.write(json.dumps(answer).encode() + b"\n")
                f.flush()

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=client, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True, name="control").start()
    return srv


def control_request(path: str, request: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """Send one request to a running switch's control socket and return the answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(json.dumps(request).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


# ---------------------------------------------------------------- command line

def build_parser() -> argparse.ArgumentParser:
    """simple_switch(_grpc)'s command line (BMv2's options_parse.cpp and the target options
    after ``--``); every flag and what pyswitch does with it: docs/pyswitch-api.md, "Flags"."""
    p = OneLineParser(
        prog="python -m pyswitch run",
        description="Run a pyswitch v1model switch on Linux interfaces with a P4Runtime "
                    "server (command line as BMv2's simple_switch_grpc).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m pyswitch run -i 1@veth1 -i 2@veth2 --device-id 1 "
               "--grpc-server-addr 127.0.0.1:9559 build/ina.json")
    p.add_argument("config", nargs="?", help="compiled program (pyswitch compile output)")
    p.add_argument("-i", "--interface", action="append", default=[], metavar="N@IFACE",
                   help="attach port N to interface IFACE (repeatable)")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--grpc-server-addr", default=None, metavar="HOST:PORT",
                   help="P4Runtime server address (default 127.0.0.1:9559, with "
                        "--listen-all 0.0.0.0:9559; as pyswitch-simple-switch, like BMv2's "
                        "simple_switch: none unless given)")
    p.add_argument("--cpu-port", type=int, default=None,
                   help="port number of the CPU port (packet-in/out); none by default")
    p.add_argument("--no-p4", action="store_true",
                   help="start without a program (wait for SetForwardingPipelineConfig)")
    p.add_argument("--log-console", action="store_true", help="log to stderr")
    p.add_argument("--log-file", metavar="PATH", help="log to this file")
    p.add_argument("--log-flush", action="store_true",
                   help="with --log-file: flush after every message")
    p.add_argument("-L", "--log-level", default="info",
                   choices=["trace", "debug", "info", "warn", "error", "off"],
                   help="trace: one account per packet (parser, tables, actions, egress); "
                        "default info (BMv2's default is trace)")
    p.add_argument("--pcap", nargs="?", const=".", default=None, metavar="DIR",
                   help="write IFACE_in.pcap and IFACE_out.pcap per port into DIR "
                        "(default: the current directory)")
    p.add_argument("--dump-packet-data", type=int, default=0, metavar="N",
                   help="log the first N bytes of every received and sent frame (info)")
    p.add_argument("--thrift-port", type=int, default=None,
                   help="serve BMv2's Thrift runtime API (simple_switch_CLI) on this port")
    p.add_argument("--thrift-addr", default=None, metavar="HOST",
                   help="address the Thrift server binds (pyswitch's own flag; default "
                        "127.0.0.1, with --listen-all 0.0.0.0)")
    p.add_argument("--listen-all", action="store_true",
                   help="servers without an explicit address listen on every interface "
                        "(0.0.0.0, BMv2's default) instead of 127.0.0.1 (pyswitch's own flag)")
    # accepted, no effect (docs/pyswitch-api.md, "Flags"): BMv2 facilities pyswitch lacks
    for flag in ("--nanolog", "--notifications-addr", "--debugger-addr", "--restore-state",
                 "--packet-in", "--grpc-server-ssl-cert", "--grpc-server-ssl-key",
                 "--grpc-server-cacert", "--dp-grpc-server-addr", "--load-modules"):
        p.add_argument(flag, metavar="X", help="accepted, no effect")
    for flag in ("--debugger", "--grpc-server-ssl", "--grpc-server-with-client-auth",
                 "--enable-swap"):
        p.add_argument(flag, action="store_true", help="accepted, no effect")
    p.add_argument("--priority-queues", type=int, default=1, metavar="N",
                   help="egress queues per port (standard_metadata.priority picks one)")
    p.add_argument("--queue-rate", action="append", default=[], metavar="PORT|all:PPS",
                   help="egress queue rate in packets/s, e.g. 'all:1000' or '2:500' "
                        "(pyswitch's own flag; BMv2 sets it with the CLI's set_queue_rate)")
    p.add_argument("--queue-depth", action="append", default=[], metavar="PORT|all:N",
                   help="egress queue capacity in packets (default 64; pyswitch's own flag, "
                        "BMv2's set_queue_depth)")
    p.add_argument("--max-port-count", type=int, default=512, metavar="N",
                   help="accepted, no effect")
    p.add_argument("--drop-port", type=int, metavar="N",
                   help="accepted; only 511 (BMv2's default) is supported")
    p.add_argument("-v", "--version", action="store_true", help="print the version and exit")
    p.add_argument("--json-version", action="store_true",
                   help="print the BMv2 JSON version pyswitch's Thrift server emits and exit")
    p.add_argument("--impair", action="append", default=[], metavar="PORT|all:SPEC",
                   help="link impairment, e.g. 'all:loss=0.02,dup=0.01,reorder=0.01,"
                        "delay_ms=1,seed=7' (dir=in|out|both, default both)")
    p.add_argument("--control-socket", metavar="PATH",
                   help="UNIX socket for run-time impairment changes and counters")
    p.add_argument("--seed", type=int, default=0, help="seed of the switch's own randomness")
    return p


def check_bmv2_options(args: argparse.Namespace) -> None:
    """BMv2's own checks of its options, as one-line usage errors (pure, no I/O but stat)."""
    if args.pcap is not None and not os.path.isdir(args.pcap):
        if args.config is None and args.pcap.endswith(".json"):
            # ``--pcap prog.json``: the optional DIR swallowed the program (BMv2's implicit
            # value never takes the next word)
            args.config, args.pcap = args.pcap, "."
        else:
            raise UsageError(f"directory {args.pcap!r} specified with '--pcap' does not exist")
    if args.dump_packet_data < 0:
        raise UsageError("--dump-packet-data must be >= 0")
    if args.drop_port is not None and args.drop_port != 511:
        raise UsageError(f"--drop-port {args.drop_port}: only 511 is supported")
    if args.max_port_count < 0:
        raise UsageError("--max-port-count cannot be negative")
    if args.thrift_port is not None and not 0 <= args.thrift_port < 65536:
        raise UsageError(f"--thrift-port {args.thrift_port}: not a TCP port")


def parse_queue_option(flag: str, text: str) -> tuple[int | None, int]:
    """``PORT:VALUE`` or ``all:VALUE`` of --queue-rate / --queue-depth: (port or None,
    value); a UsageError (one line) for anything else."""
    where, sep, value = text.partition(":")
    try:
        if not sep:
            raise ValueError
        port = None if where == "all" else int(where)
        n = int(value)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected PORT:N or all:N") from None
    if (port is not None and not 0 <= port < 512) or n < 0:
        raise UsageError(f"{flag} {text!r}: port 0..511 and a value >= 0")
    return port, n


def configure_queues(queues: Any, args: argparse.Namespace) -> None:
    """--priority-queues, --queue-depth, --queue-rate onto the device's egress queues."""
    if args.priority_queues < 1:
        raise UsageError("--priority-queues must be >= 1")
    queues.nb_queues = args.priority_queues
    for flag, texts, set_ in (("--queue-depth", args.queue_depth, queues.set_depth),
                              ("--queue-rate", args.queue_rate, queues.set_rate)):
        for text in texts:
            port, n = parse_queue_option(flag, text)
            set_(n, port)


def set_listen_addresses(args: argparse.Namespace, p4runtime_by_default: bool) -> None:
    """Fill in the servers' addresses not given: 127.0.0.1 unless ``--listen-all`` (0.0.0.0).
    Loopback by default because pyswitch runs on laptops and shared servers, where an open
    P4Runtime or Thrift port lets anyone on the network rewrite the switch (BMv2 listens on
    every interface; launchers that need that pass the address, or --listen-all)."""
    host = "0.0.0.0" if args.listen_all else "127.0.0.1"
    if args.grpc_server_addr is None and p4runtime_by_default:
        args.grpc_server_addr = f"{host}:9559"
    if args.thrift_addr is None:
        args.thrift_addr = host


def parse_interfaces(specs: list[str]) -> dict[int, str]:
    ports: dict[int, str] = {}
    for spec in specs:
        num, sep, ifname = spec.partition("@")
        if not sep or not ifname:
            raise UsageError(f"-i {spec!r}: expected N@IFACE")
        try:
            n = int(num)
        except ValueError:
            raise UsageError(f"-i {spec!r}: port {num!r} is not a number") from None
        if n in ports:
            raise UsageError(f"-i {spec!r}: port {n} given twice")
        if ifname in ports.values():
            raise UsageError(f"-i {spec!r}: interface {ifname} given twice")
        ports[n] = ifname
    return ports


def setup_logging(args: argparse.Namespace) -> None:
    level = {"trace": TRACE, "debug": logging.DEBUG, "info": logging.INFO,
             "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}
    root = logging.getLogger("pyswitch")
    root.setLevel(level[args.log_level])
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    handlers: list[logging.Handler] = []
    if args.log_console:
        handlers.append(logging.StreamHandler(sys.stderr))
    if args.log_file:
        # a FileHandler flushes after every record: --log-flush is what it always does
        handlers.append(logging.FileHandler(args.log_file))
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)


def _traced_make_switch(device: Device) -> None:
    """Every switch the device builds (at start and on each SetForwardingPipelineConfig)
    gets the per-packet trace (``--log-level trace``)."""
    plain = device.make_switch

    def make_switch(program: Any) -> Any:
        return install_trace(plain(program))

    device.make_switch = make_switch  # type: ignore[method-assign]


@dataclass
class RunningSwitch:
    """One started switch of ``pyswitch run`` (or of ``run-many``): its device, ports,
    forwarding loop and servers, stopped by :meth:`stop`."""

    args: argparse.Namespace
    device: Device
    ports: dict[int, Any]
    loop: ForwardingLoop
    server: Any = None
    bound: int = 0
    thrift: Any = None
    control: socket.socket | None = None
    ifaces: dict[int, str] = field(default_factory=dict)

    def serve_control(self) -> None:
        """Its control socket, if ``--control-socket`` was given."""
        if self.args.control_socket:
            self.control = serve_control(self.loop, self.args.control_socket)

    def log_started(self) -> None:
        a = self.args
        log.info("device %d: P4Runtime on %s (port %d), ports %s", a.device_id,
                 a.grpc_server_addr or "none", self.bound,
                 ", ".join(f"{n}@{i}" for n, i in sorted(self.ifaces.items())) or "none")
        if self.thrift is not None:
            log.info("device %d: Thrift runtime server on %s:%d", a.device_id,
                     a.thrift_addr, a.thrift_port)

    def stop(self) -> None:
        """Servers down, control socket removed, ports closed (after the loop returned)."""
        if self.server is not None:
            self.server.stop(grace=0.5).wait(2)
        if self.thrift is not None:
            self.thrift.stop()
        if self.control is not None:
            self.control.close()
            try:
                os.unlink(self.args.control_socket)
            except OSError:
                pass
        _close(self.ports)


def check_switch_args(args: argparse.Namespace) -> tuple[dict[int, str], PortImpairments]:
    """One switch's arguments checked before anything opens (no I/O but stat): its
    interfaces and impairments; a UsageError or ImpairmentSpecError (one line) otherwise."""
    check_bmv2_options(args)
    ifaces = parse_interfaces(args.interface)
    impairments = PortImpairments(names=ifaces)  # each port its own loss stream
    for text in args.impair:
        port, spec = parse_port_option(text)
        for n in (ifaces if port is None else [port]):
            if n not in ifaces:
                raise UsageError(f"--impair {text!r}: port {n} is not attached with -i")
            impairments.set(n, spec)
    if args.config and args.no_p4:
        raise UsageError("give either a compiled program or --no-p4, not both")
    if args.priority_queues < 1:
        raise UsageError("--priority-queues must be >= 1")
    return ifaces, impairments


def start_switch(args: argparse.Namespace, p4runtime_by_default: bool,
                 ports: dict[int, Any], *, native_loop: bool | None = None) -> RunningSwitch:
    """Open ``args``'s ports (into ``ports``, which the caller closes on failure), load its
    program and start its P4Runtime and Thrift servers; the forwarding loop is built, not
    run.  Raises UsageError, ImpairmentSpecError, PortError or OSError (one line each)."""
    ifaces, impairments = check_switch_args(args)
    device = Device(device_id=args.device_id, cpu_port=args.cpu_port, seed=args.seed)
    configure_queues(device.queues, args)
    if args.log_level == "trace" and (args.log_console or args.log_file):
        _traced_make_switch(device)
    if args.config:
        program, raw = _load_program(args.config)
        device.load(program, raw)
    for n, ifname in ifaces.items():
        ports[n] = Port(ifname)
        if args.pcap is not None or args.dump_packet_data:
            ports[n] = ObservedPort(ports[n], n, args.pcap, args.dump_packet_data)
    loop = ForwardingLoop(device, ports, impairments, native_loop=native_loop)
    set_listen_addresses(args, p4runtime_by_default)
    server, bound = (serve(device, args.grpc_server_addr) if args.grpc_server_addr
                     else (None, 0))
    thrift = None
    if args.thrift_port is not None:
        from pyswitch.thriftapi.server import serve_thrift

        try:
            thrift = serve_thrift(device, args.thrift_addr, args.thrift_port,
                                  sorted(ifaces.items()))
        except OSError as exc:
            if server is not None:
                server.stop(grace=0)
            raise OSError(f"--thrift-port {args.thrift_port}: "
                          f"{exc.strerror or exc}") from None
    return RunningSwitch(args, device, ports, loop, server, bound, thrift, ifaces=ifaces)


def start_error(prog: str, exc: Exception) -> int:
    """A start failure as one line on stderr; the exit status (2: usage, 1: the system)."""
    if isinstance(exc, (UsageError, ImpairmentSpecError)):
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    print(f"{prog}: {exc.strerror if isinstance(exc, PortError) else exc}", file=sys.stderr)
    return 1


START_ERRORS = (UsageError, ImpairmentSpecError, PortError, OSError)
"""What :func:`start_switch` raises for bad input or an unusable system (one line each)."""


def main(argv: list[str] | None = None, p4runtime_by_default: bool = True) -> int:
    """simple_switch_grpc's command line; with ``p4runtime_by_default`` False, simple_switch's
    (no P4Runtime server unless ``--grpc-server-addr`` is given: the ``pyswitch-simple-switch``
    entry point, which p4-utils' Thrift-only P4Switch starts several of on one host)."""
    # ``--`` separates BMv2's general options from the target's (simple_switch_grpc's
    # --grpc-server-addr, --cpu-port, ...): pyswitch has one parser for both
    argv = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--"]
    prog = "pyswitch run"
    ports: dict[int, Any] = {}
    try:
        args = build_parser().parse_args(argv)
        if args.version:
            print(f"pyswitch {version()}")
            return 0
        if args.json_version:
            print(BMV2_JSON_VERSION)
            return 0
        check_switch_args(args)  # before logging is set up: a bad flag writes no log file
        native_mode()  # a PYSWITCH_NATIVE typo is one line, before anything starts
        setup_logging(args)
        pin_mmap_threshold()  # replaced pipelines' registers go back to the OS
        sw = start_switch(args, p4runtime_by_default, ports)
    except START_ERRORS as exc:
        _close(ports)
        return start_error(prog, exc)
    sw.serve_control()

    def on_signal(signum: int, _frame: Any) -> None:
        sw.loop.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sw.log_started()
    try:
        sw.loop.run()
    finally:
        sw.stop()
    return 0


def version() -> str:
    """The installed package's version (``pyswitch run --version``)."""
    try:
        from importlib.metadata import version as _v

        return _v("insync")
    except Exception:  # not installed (a source tree on PYTHONPATH)
        return "unknown"


def _load_program(path: str) -> tuple[Any, bytes]:
    try:  # a regular file of bounded size: a FIFO or /dev/zero is one line, not a hang
        raw = read_input(path, MAX_DEVICE_CONFIG_BYTES, "compiled program")
    except InputFileError as exc:
        raise UsageError(f"cannot read {exc}") from None
    try:
        program = program_from_device_config(raw)
    except Exception as exc:
        raise UsageError(f"{path}: not a pyswitch compiled program ({exc})") from None
    try:  # the limits a pushed pipeline gets (docs/pyswitch-api.md, Limits)
        check_limits(program)
    except P4RTError as exc:
        raise UsageError(f"{path}: {exc.message}") from None
    return program, raw


def _close(ports: dict[int, Any]) -> None:
    for p in ports.values():
        p.close()


if __name__ == "__main__":
    raise SystemExit(main())
