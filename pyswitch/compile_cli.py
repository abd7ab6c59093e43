"""``python -m pyswitch compile``: the p4c-like command line of pyswitch.

    python -m pyswitch compile prog.p4 -o build/prog.json \
        --p4runtime-files build/prog.p4info.txtpb [-I DIR] [-D NAME[=VAL]]

Writes the device config (``-o``) and the P4Info (text format; JSON for a ``.json`` name,
binary for ``.bin``/``.pb``, as p4c chooses by the name). ``-o`` names the file, as
p4c-bm2-ss does, or (entry point ``pyswitch-p4c``) an existing directory, as the ``p4c``
driver does: the config is then ``DIR/<program>.json``. The flags of p4c-bm2-ss and p4c that
change nothing here are accepted and listed in docs/pyswitch-api.md ("Flags"). On a compile
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
_DIAG_FLAGS = ("--Wdisable", "--Wwarn", "--Werror", "--Winfo")


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
                    help="P4Info file(s) to write, comma-separated or repeated (text; "
                         ".json: JSON; .bin/.pb: binary)")
    ap.add_argument("--p4runtime-file", dest="p4info_legacy", default=None,
                    help="one P4Info file, format from --p4runtime-format (p4c's old flag)")
    ap.add_argument("--p4runtime-format", choices=["text", "json", "binary"], default="text",
                    help="format of --p4runtime-file")
    ap.add_argument("--p4v", default="16", help="P4 language version: only 16 (p4c-bm2-ss)")
    ap.add_argument("--emit-externs", action="store_true",
                    help="accepted for p4c-bm2-ss compatibility; no effect (pyswitch rejects "
                         "unknown externs)")
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


def p4info_format(path: str, default: str = "text") -> str:
    """p4c's choice of P4Info format by file name: ``.json`` JSON, ``.bin``/``.pb`` binary,
    anything else (``.txt``, ``.txtpb``, ...) ``default``."""
    suffix = Path(path).suffix.lower()
    return {".json": "json", ".bin": "binary", ".pb": "binary"}.get(suffix, default)


def _p4info_files(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(path, format) of every P4Info to write."""
    files = [(f, p4info_format(f)) for item in args.p4info for f in item.split(",") if f]
    if args.p4info_legacy:
        files.append((args.p4info_legacy, args.p4runtime_format))
    return files


def _outputs(args: argparse.Namespace, src: Path, driver: bool = False) -> list[Path]:
    """Every file to write, checked before compiling (a mistake in a path should not cost a
    compile, and is reported as the path, not as an OSError from deep inside)."""
    if args.output is not None and not args.output.strip():
        raise UsageError("-o: empty path (leave -o out to write <name>.json)")
    out = Path(args.output) if args.output is not None else src.with_suffix(".json")
    if args.output and out.is_dir() and driver:  # the p4c driver's -o: an output directory
        out = out / f"{src.stem}.json"
    paths = [out, *(Path(f) for f, _ in _p4info_files(args))]
    seen: set[Path] = set()
    for p in paths:
        if str(p) in ("", "."):
            raise UsageError(f"output path {str(p)!r} is empty")
        if p.is_dir():
            raise UsageError(f"{p}: output is a directory")
        if p.exists() and not p.is_file():  # a FIFO, a device: never replaced by a file
            raise UsageError(f"{p}: output exists and is not a regular file")
        if p.resolve() in seen:
            raise UsageError(f"{p}: named as two outputs")
        seen.add(p.resolve())
        parent = next((d for d in (p.parent, *p.parent.parents) if d.exists()), None)
        if parent is not None and not parent.is_dir():
            raise UsageError(f"{p}: {parent} is not a directory")
    if src.resolve() in seen:
        raise UsageError(f"{src}: an output would overwrite the source")
    return paths


def _render_p4info(prog: object, fmt: str) -> bytes:
    p4info = prog.p4info  # type: ignore[attr-defined]
    if fmt == "json":
        from google.protobuf import json_format

        return json_format.MessageToJson(p4info).encode()
    if fmt == "binary":
        return p4info.SerializeToString()
    return prog.p4info_text().encode()  # type: ignore[attr-defined]


def main(argv: list[str] | None = None, driver: bool = False) -> int:
    """p4c-bm2-ss's command line (``-o`` a file); with ``driver``, the ``p4c`` driver's
    (``-o`` may be a directory: ``DIR/<program>.json``), as ``pyswitch-p4c`` runs it."""
    # p4c's diagnostic switches (--Wdisable, --Wwarn=DIAG, ...): accepted, no effect; their
    # value is only ever attached with '=', so they are dropped before parsing
    argv = [a for a in (sys.argv[1:] if argv is None else argv)
            if not a.startswith(_DIAG_FLAGS)]
    try:
        args = _parser().parse_args(argv)
        if args.arch != "v1model":
            raise UsageError(f"--arch {args.arch}: only v1model is supported")
        if args.std not in ("p4-16", "p4_16"):
            raise UsageError(f"--std {args.std}: only p4-16 is supported")
        if args.target != "bmv2":
            raise UsageError(f"--target {args.target}: only bmv2 is supported")
        if args.p4v not in ("16", "p4-16", "p4_16"):
            raise UsageError(f"--p4v {args.p4v}: only P4_16 is supported")
        defines = _defines(args.defines)
        src = Path(args.source)
        if src.is_dir():  # the preprocessor would call it "no such file"
            raise UsageError(f"{src}: the source is a directory, not a P4 program")
        outputs = _outputs(args, src, driver)
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
        data = [prog.to_bytes()] + [_render_p4info(prog, fmt)
                                    for _, fmt in _p4info_files(args)]
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
