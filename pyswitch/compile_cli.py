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

from pyswitch.errors import OneLineParser, P4CompileError, UsageError
from pyswitch.inputfile import shown_path
from pyswitch.program import compile_p4, write_files_atomic

PROG = "pyswitch compile"


def _parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="python -m pyswitch compile",
                       description="compile a P4_16 v1model program for pyswitch",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example:\n  python -m pyswitch compile p4src/ina.p4 -o "
                              "build/ina.json --p4runtime-files build/ina.p4info.txtpb "
                              "-D INA_NUM_SLOTS=64")
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


def _defines(items: list[str]) -> dict[str, str]:
    defines = {}
    for d in items:
        k, _, v = d.partition("=")
        if not k.isidentifier():
            raise UsageError(f"-D {d!r}: {k!r} is not a macro name")
        defines[k] = v if v else "1"
    return defines


def _outputs(args: argparse.Namespace, src: Path) -> list[Path]:
    """Every file to write, checked before compiling (a mistake in a path should not cost a
    compile, and is reported as the path, not as an OSError from deep inside)."""
    if args.output is not None and not args.output.strip():
        raise UsageError("-o: empty path (leave -o out to write <name>.json)")
    out = Path(args.output) if args.output is not None else src.with_suffix(".json")
    paths = [out, *(Path(f) for f in args.p4info)]
    seen: set[Path] = set()
    for p in paths:
        if str(p) in ("", "."):
            raise UsageError(f"output path {str(p)!r} is empty")
        if p.is_dir():
            raise UsageError(f"{p}: output is a directory")
        if p.resolve() in seen:
            raise UsageError(f"{p}: named as two outputs")
        seen.add(p.resolve())
        parent = next((d for d in (p.parent, *p.parent.parents) if d.exists()), None)
        if parent is not None and not parent.is_dir():
            raise UsageError(f"{p}: {parent} is not a directory")
    if src.resolve() in seen:
        raise UsageError(f"{src}: an output would overwrite the source")
    return paths


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.arch != "v1model" or args.std not in ("p4-16", "p4_16"):
            raise UsageError("only --arch v1model and --std p4-16 are supported")
        defines = _defines(args.defines)
        src = Path(args.source)
        if src.is_dir():  # the preprocessor would call it "no such file"
            raise UsageError(f"{src}: the source is a directory, not a P4 program")
        outputs = _outputs(args, src)
    except OSError as e:  # a path the OS cannot even look up (too long)
        print(f"{PROG}: {shown_path(e.filename or args.source)}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    try:
        prog = compile_p4(src, args.include, defines)
        # render both outputs before writing either: nothing is written unless all succeed
        data = [prog.to_bytes()] + [prog.p4info_text().encode()] * len(args.p4info)
    except P4CompileError as e:
        print(str(e), file=sys.stderr)
        return 1
    except RecursionError:
        print(f"{src}:0:0: program too deeply nested", file=sys.stderr)
        return 1
    except ValueError as e:  # e.g. a value P4Info's protobuf fields cannot hold
        print(f"{src}:0:0: cannot build P4Info: {e}", file=sys.stderr)
        return 1
    try:
        write_files_atomic(list(zip(outputs, data, strict=True)))
    except OSError as e:
        where = e.filename or outputs[0]
        print(f"{PROG}: cannot write {where}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
