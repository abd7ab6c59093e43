"""`python -m pyswitch compile ...` (like p4c's BMv2 backend), `python -m pyswitch run ...`
(like simple_switch_grpc) and `python -m pyswitch stf ...` (STF packet tests)."""

from __future__ import annotations

import sys

USAGE = """usage: python -m pyswitch {compile,run,run-many,stf} ...

  compile   compile a P4_16 v1model program (mirrors p4c --target bmv2 --arch v1model)
  run       run a switch on Linux interfaces with a P4Runtime server (mirrors simple_switch_grpc)
  run-many  run several switches in one process (SPEC.json: each switch's run arguments)
  stf       run STF packet tests, one program or a corpus (as p4c's bmv2stf.py)

example:
  python -m pyswitch compile p4src/ina.p4 -o build/ina.json --p4runtime-files build/ina.p4info.txtpb
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("pyswitch: a command is required (compile, run, run-many or stf; --help)", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "compile":
        from pyswitch.compile_cli import main as compile_main

        return compile_main(rest)
    if command == "run":
        from pyswitch.daemon import main as run_main

        return run_main(rest)
    if command == "run-many":
        from pyswitch.run_many import main as run_many_main

        return run_many_main(rest)
    if command == "stf":
        from pyswitch.stf.runner import main as stf_main

        return stf_main(rest)
    print(f"pyswitch: unknown command {command!r} (one of compile, run, run-many, stf)", file=sys.stderr)
    return 2


def p4c_bm2_ss() -> int:
    """``pyswitch-p4c-bm2-ss``: p4c-bm2-ss's command line (``P4C=pyswitch-p4c-bm2-ss``)."""
    from pyswitch.compile_cli import main as compile_main

    return compile_main(sys.argv[1:])


def p4c_driver() -> int:
    """``pyswitch-p4c``: the ``p4c`` driver's command line (``-o`` may be a directory)."""
    from pyswitch.compile_cli import main as compile_main

    return compile_main(sys.argv[1:], driver=True)


def simple_switch_grpc() -> int:
    """``pyswitch-simple-switch-grpc``: simple_switch_grpc's command line
    (``BMV2_SWITCH_EXE=pyswitch-simple-switch-grpc``): P4Runtime on 127.0.0.1:9559 unless
    ``--grpc-server-addr`` (or ``--listen-all``: 0.0.0.0) says otherwise."""
    from pyswitch.daemon import main as run_main

    return run_main(sys.argv[1:])


def simple_switch() -> int:
    """``pyswitch-simple-switch``: simple_switch's command line (Thrift, no P4Runtime server
    unless ``--grpc-server-addr`` is given)."""
    from pyswitch.daemon import main as run_main

    return run_main(sys.argv[1:], p4runtime_by_default=False)


if __name__ == "__main__":
    sys.exit(main())
