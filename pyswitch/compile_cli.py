"""``python -m pyswitch compile``: the p4c-like command line of pyswitch.

    python -m pyswitch compile prog.p4 -o build/prog.json \
        --p4runtime-files build/prog.p4info.txtpb [-I DIR] [-D NAME[=VAL]]

Writes the device config (``-o``) and the P4Info in protobuf text format. On a compile
error: one ``file:line:col: message`` line on stderr, exit status 1, no file written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyswitch.errors import P4CompileError
from pyswitch.program import _atomic_write, compile_p4


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pyswitch compile",
                                 description="compile a P4_16 v1model program for pyswitch")
    ap.add_argument("source", help="the P4 program")
    ap.add_argument("-o", "--output", help="device config to write (default: <name>.json)")
    ap.add_argument("--p4runtime-files", dest="p4info", action="append", default=[],
                    help="P4Info file(s) to write (text format)")
    ap.add_argument("--p4runtime-format", choices=["text"], default="text",
                    help="P4Info format (only text)")
    ap.add_argument("-I", dest="include", action="append", default=[],
                    help="add an include directory")
    ap.add_argument("-D", dest="defines", action="append", default=[],
                    help="define a macro NAME[=VALUE]")
    ap.add_argument("--target", default="bmv2", help="accepted for p4c compatibility (bmv2)")
    ap.add_argument("--arch", default="v1model", help="accepted for p4c compatibility "
                                                      "(v1model)")
    ap.add_argument("--std", default="p4-16", help="accepted for p4c compatibility (p4-16)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.arch != "v1model" or args.std not in ("p4-16", "p4_16"):
        print("pyswitch compile: only --arch v1model and --std p4-16 are supported",
              file=sys.stderr)
        return 1
    defines = {}
    for d in args.defines:
        k, _, v = d.partition("=")
        defines[k] = v if v else "1"
    src = Path(args.source)
    try:
        prog = compile_p4(src, args.include, defines)
    except P4CompileError as e:
        print(str(e), file=sys.stderr)
        return 1
    except RecursionError:
        print(f"{src}:0:0: program too deeply nested", file=sys.stderr)
        return 1
    out = Path(args.output) if args.output else src.with_suffix(".json")
    try:
        _atomic_write(out, prog.to_bytes())
        for f in args.p4info:
            _atomic_write(Path(f), prog.p4info_text().encode())
    except OSError as e:
        print(f"pyswitch compile: cannot write output: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
