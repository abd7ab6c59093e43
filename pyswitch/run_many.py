"""``python -m pyswitch run-many SPEC.json``: several pyswitch switches in one process.

SPEC.json names each switch by the arguments its own ``pyswitch run`` would take::

    {"switches": [["--device-id", "1", "--grpc-server-addr", "127.0.0.1:50001",
                   "-i", "1@s1-eth1", "-i", "2@s1-eth2", "--no-p4"],
                  ["--device-id", "2", "--grpc-server-addr", "127.0.0.1:50002",
                   "-i", "1@s2-eth1", "--control-socket", "/tmp/s2.sock", "--no-p4"]]}

Each switch keeps everything a ``pyswitch run`` has -- its Device (program, tables,
registers), ports, P4Runtime server on its own address and device id, Thrift server, control
socket, impairments, egress queues and counters -- so a controller sees no difference.  What
they share is the process and ONE forwarding loop (:class:`pyswitch.loop.MultiLoop`: one
epoll over every switch's ports, each ready port forwarded by its own switch), so a frame
costs one wake-up of one process however many switches the network has on this machine.
The loop is the Python one: ``PYSWITCH_LOOP=c`` (the C loop) runs a single switch only.

Logging is the process's: the first switch's ``--log-*`` options set it up (each line names
its device).  SIGTERM or SIGINT stops every switch.  A bad spec -- unreadable, not JSON,
the wrong shape, a switch's bad argument, an interface, address, control socket or Thrift
port given to two switches -- is one line on stderr and exit status 2, before anything
starts.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from pyswitch.daemon import (
    START_ERRORS,
    RunningSwitch,
    build_parser,
    check_switch_args,
    pin_mmap_threshold,
    setup_logging,
    start_error,
    start_switch,
)
from pyswitch.errors import UsageError
from pyswitch.inputfile import InputFileError, read_input_text
from pyswitch.loop import MultiLoop
from pyswitch.native import mode as native_mode

MAX_SPEC_BYTES = 1 << 20
USAGE = "usage: python -m pyswitch run-many SPEC.json (docs/pyswitch-api.md, \"run-many\")"


def parse_spec_text(text: str) -> list[list[str]]:
    """The switches' argument lists of a SPEC.json's text (pure); UsageError naming what
    is wrong otherwise."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"not JSON ({exc})") from None
    if not isinstance(doc, dict) or set(doc) != {"switches"}:
        raise UsageError('expected an object {"switches": [[ARG, ...], ...]}')
    switches = doc["switches"]
    if not isinstance(switches, list) or not switches:
        raise UsageError('"switches" must be a non-empty list of argument lists')
    for k, argv in enumerate(switches, 1):
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise UsageError(f"switch {k}: expected a list of strings (its 'pyswitch run' "
                             "arguments)")
    return [list(a) for a in switches]


def parse_switch_args(argvs: list[list[str]]) -> list[argparse.Namespace]:
    """Each switch's arguments parsed and checked as ``pyswitch run`` does, then checked
    against each other: nothing two switches would both claim (pure but for stat)."""
    parsed: list[argparse.Namespace] = []
    claimed: dict[tuple[str, str], int] = {}
    for k, argv in enumerate(argvs, 1):
        try:
            args = build_parser().parse_args([a for a in argv if a != "--"])
            if args.version or args.json_version:
                raise UsageError("--version and --json-version are not switch options")
            ifaces, _ = check_switch_args(args)
        except UsageError as exc:
            raise UsageError(f"switch {k}: {exc}") from None
        # a P4Runtime server by default, as pyswitch run: 127.0.0.1:9559 for every switch
        # would collide, so each switch names its own
        if args.grpc_server_addr is None:
            raise UsageError(f"switch {k}: --grpc-server-addr is required (each switch "
                             "its own server)")
        owned = [("interface", i) for i in ifaces.values()]
        owned.append(("--grpc-server-addr", args.grpc_server_addr))
        if args.control_socket:
            owned.append(("--control-socket", args.control_socket))
        if args.thrift_port is not None:
            owned.append(("--thrift-port", str(args.thrift_port)))
        for what in owned:
            other = claimed.setdefault(what, k)
            if other != k:
                raise UsageError(f"switch {k}: {what[0]} {what[1]} is switch {other}'s too")
        parsed.append(args)
    return parsed


def main(argv: list[str] | None = None) -> int:
    """``pyswitch run-many SPEC.json``: start every switch of the spec, forward for all of
    them in one loop until SIGTERM/SIGINT, stop them all."""
    prog = "pyswitch run-many"
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        print(__doc__.split("\n\n", 1)[1].rstrip())
        return 0
    if len(argv) != 1:
        print(f"{prog}: expected one argument, the spec file ({USAGE})", file=sys.stderr)
        return 2
    path = argv[0]
    try:
        text = read_input_text(path, MAX_SPEC_BYTES, "switch spec")
        all_args = parse_switch_args(parse_spec_text(text))
        native_mode()
    except InputFileError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"{prog}: {path}: {exc}", file=sys.stderr)
        return 2
    setup_logging(all_args[0])
    pin_mmap_threshold()
    started: list[RunningSwitch] = []
    for k, args in enumerate(all_args, 1):
        ports: dict[int, Any] = {}
        try:
            started.append(start_switch(args, True, ports, native_loop=False))
        except START_ERRORS as exc:
            for p in ports.values():
                p.close()
            for sw in started:
                sw.stop()
            return start_error(f"{prog}: switch {k}", exc)
    for sw in started:
        sw.serve_control()
    loop = MultiLoop([sw.loop for sw in started])

    def on_signal(signum: int, _frame: Any) -> None:
        loop.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for sw in started:
        sw.log_started()
    try:
        loop.run()
    finally:
        for sw in started:
            sw.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
