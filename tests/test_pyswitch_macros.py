"""Function-like macros of pyswitch's preprocessor (pyswitch.macros), as cpp expands them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyswitch import P4CompileError
from pyswitch.macros import MacroError, expand, parse_function_macro
from pyswitch.preprocess import preprocess


def _funcs(**defs: str) -> tuple[dict[str, str], dict[str, tuple[list[str], str]]]:
    objs, funcs = {}, {}
    for name, text in defs.items():
        if text.startswith("("):
            funcs[name] = parse_function_macro(name, text[1:])
        objs[name] = text
    return objs, funcs


def test_arguments_nesting_and_rescan() -> None:
    objs, funcs = _funcs(SQ="(x) ((x) * (x))", ADD="(a, b) (a + SQ(b))", N="3", F="(x) F(x)")
    assert expand("y = ADD(f(1, 2), N);", objs, funcs) == "y = (f(1, 2) + ((3) * (3)));"
    assert expand("SQ + 1", objs, funcs) == "SQ + 1"  # the name alone is no invocation
    assert expand("F(2)", objs, funcs) == "F(2)"       # not expanded inside itself
    assert expand("Z()", *_funcs(Z="() 7")) == "7"


def test_errors() -> None:
    objs, funcs = _funcs(SQ="(x) ((x) * (x))")
    with pytest.raises(MacroError, match="takes 1 argument"):
        expand("SQ(1, 2)", objs, funcs)
    with pytest.raises(MacroError, match="must end on its line"):
        expand("SQ(1,", objs, funcs)
    with pytest.raises(MacroError, match="variadic"):
        parse_function_macro("V", "x, ...) x")


def test_located_in_the_program(tmp_path: Path) -> None:
    f = tmp_path / "m.p4"
    f.write_text("#define SQ(x) ((x) * (x))\n#if defined(SQ)\nconst bit<8> A = SQ(3);\n"
                 "#endif\nconst bit<8> B = SQ(4\n  );\n")
    with pytest.raises(P4CompileError) as ei:
        preprocess(str(f))
    assert (ei.value.line, "must end on its line") == (5, "must end on its line")
    assert "must end on its line" in ei.value.message
    f.write_text("#define SQ(x) ((x) * (x))\n#if defined(SQ)\nconst bit<8> A = SQ(3);\n#endif\n")
    assert "const bit<8> A = ((3) * (3));" in preprocess(str(f)).text
