"""The extern registry (`pyswitch/externs/`, docs/pyswitch-externs.md): every extern of
v1model and core.p4 is in it, served or refused with a reason, as the docs' table says;
refused ones are refused at compile time; the walk-through's toy extern, taken from the
docs as written, runs on both paths with equal results."""

from __future__ import annotations

import fnmatch
import re
import types
from pathlib import Path

import pytest

from pyswitch import Switch, compile_p4, externs
from pyswitch.errors import P4CompileError
from pyswitch.native import unavailable

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "pyswitch-externs.md"

# every extern p4c's v1model.p4 (v1.2.5) declares, and core.p4's verify
P4C_V1MODEL = {
    "function": {"random", "digest", "mark_to_drop", "hash", "verify_checksum",
                 "update_checksum", "verify_checksum_with_payload",
                 "update_checksum_with_payload", "resubmit", "resubmit_preserving_field_list",
                 "recirculate", "recirculate_preserving_field_list", "clone", "clone3",
                 "clone_preserving_field_list", "truncate", "assert", "assume", "log_msg",
                 "verify"},
    "object": {"counter", "direct_counter", "meter", "direct_meter", "register",
               "action_profile", "action_selector", "Checksum16"},
}
SERVED = {"random", "mark_to_drop", "hash", "verify_checksum", "update_checksum",
          "verify_checksum_with_payload", "update_checksum_with_payload", "clone",
          "clone_preserving_field_list", "log_msg", "verify", "counter", "direct_counter",
          "register"}


def _declared(include: Path) -> dict[str, set[str]]:
    text = include.read_text()
    return {"function": set(re.findall(r"^extern\s+\w+\s+(\w+)\s*[<(]", text, re.M)),
            "object": set(re.findall(r"^extern\s+(\w+)\s*(?:<[^>]*>)?\s*\{", text, re.M))}


def test_every_v1model_extern_is_in_the_registry() -> None:
    ours = [_declared(ROOT / "pyswitch" / "include" / n) for n in ("v1model.p4", "core.p4")]
    for kind in ("function", "object"):
        names = P4C_V1MODEL[kind] | {n for d in ours for n in d[kind]}
        names -= {"packet_in", "packet_out"}  # core.p4's packets: the parser and deparser
        for n in sorted(names):
            ext = externs.function(n) if kind == "function" else externs.obj(n)
            assert ext is not None, f"{kind} {n} is not in the registry"
            assert isinstance(ext, externs.Refused) == (n not in SERVED), n
            assert ext.served, n


def test_the_docs_table_says_where_each_is_served() -> None:
    table = DOC.read_text().split("## Where each v1model extern is served")[1]
    rows = [r for r in table.split("## Walk-through")[0].splitlines() if r.startswith("| `")]
    doc: dict[str, str] = {}
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        for n in re.findall(r"`([\w*]+)`", cells[0]):
            doc[n] = cells[2]
    for kind, names in P4C_V1MODEL.items():
        for n in names:
            key = next(k for k in doc if fnmatch.fnmatchcase(n, k))
            refused = doc[key].startswith("refused")
            ext = externs.function(n) if kind == "function" else externs.obj(n)
            assert refused == isinstance(ext, externs.Refused), n


@pytest.mark.parametrize("decl, use", [
    ("meter(8, MeterType.packets) m;", ""),
    ("", "resubmit_preserving_field_list(0);"),
    ("", "truncate(10);"),
])
def test_refused_externs_are_compile_errors_with_the_reason(tmp_path: Path, decl: str,
                                                            use: str) -> None:
    src = f"""#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; }}
struct H {{ h_t h; }}
struct M {{ }}
parser P(packet_in p, out H h, inout M m, inout standard_metadata_t s) {{
    state start {{ transition accept; }} }}
control V(inout H h, inout M m) {{ apply {{ }} }}
control I(inout H h, inout M m, inout standard_metadata_t s) {{
    {decl}
    apply {{ {use} }} }}
control E(inout H h, inout M m, inout standard_metadata_t s) {{ apply {{ }} }}
control C(inout H h, inout M m) {{ apply {{ }} }}
control D(packet_out p, in H h) {{ apply {{ }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
    f = tmp_path / "x.p4"
    f.write_text(src)
    with pytest.raises(P4CompileError) as ei:
        compile_p4(f)
    assert "not supported by pyswitch (" in ei.value.message
    assert ei.value.line > 0


def _block(marker: str) -> str:
    text = DOC.read_text()
    at = text.index(f"<!-- toy-extern: {marker} -->")
    m = re.compile(r"```\w*\n(.*?)```", re.S).search(text, at)
    assert m is not None
    return m.group(1)


@pytest.fixture
def toy_extern():
    """The walk-through's module, as the docs give it, registered for one test."""
    mod = types.ModuleType("pyswitch.externs.popcount")
    exec(compile(_block("module"), "docs/pyswitch-externs.md", "exec"), mod.__dict__)  # noqa: S102
    ext = mod.EXTERNS[0]
    externs.add(ext)
    try:
        yield ext
    finally:
        externs.remove(ext)


def test_without_the_module_the_toy_program_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "toy.p4"
    f.write_text(_block("program"))
    with pytest.raises(P4CompileError, match="popcount"):
        compile_p4(f)


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_the_walk_through_runs_on_both_paths(tmp_path: Path, toy_extern,
                                             monkeypatch) -> None:
    monkeypatch.setenv("PYSWITCH_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "toy.p4"
    f.write_text(_block("program"))
    prog = compile_p4(f)
    assert "_popcount(" in prog.code
    py, nat = Switch(prog, native=False), Switch(prog, native=True)
    assert nat.path == "native"
    assert py.process(0, bytes.fromhex("000000ff00")) == [(1, bytes.fromhex("000000ff08"))]
    for v in (0, 1, 0x80000000, 0xFFFFFFFF, 0x12345678, 0xA5A5A5A5):
        frame = v.to_bytes(4, "big") + b"\x00" + b"tail"
        want = [(1, v.to_bytes(4, "big") + bytes([bin(v).count("1")]) + b"tail")]
        assert py.process(3, frame) == want
        assert nat.process(3, frame) == want
