"""Parsing of preprocessed P4_16 text into a lark tree (grammar: ``p4.lark``).

P4's grammar needs to know which identifiers name types (``(T) x`` is a cast, ``T x;`` a
declaration): a pre-scan collects every declared type name, and a post-lexer turns those
identifiers into ``TYPE_IDENT`` tokens. The same post-lexer splits ``>>`` into two ``>``
inside type arguments (``register<bit<32>>``) by tracking the depth of ``<`` opened after a
type-like token, and marks the ``<`` of ``x.lookahead<T>()`` as ``GENERIC_LT``.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from pyswitch.cachedir import NotOurs, check_ours, private_dir
from pyswitch.preprocess import Source

_GRAMMAR = Path(__file__).with_name("p4.lark")

_TYPE_DECL_RES = [
    re.compile(r"\b(?:header|header_union|struct|parser|control|package|extern)\s+([A-Za-z_]\w*)\s*[<{(;]"),
    re.compile(r"\benum\s+(?:bit\s*<\s*\d+\s*>\s*|int\s*<\s*\d+\s*>\s*)?([A-Za-z_]\w*)\s*\{"),
    re.compile(r"\b(?:typedef|type)\b[^;{}]*?\b([A-Za-z_]\w*)\s*;"),
]
_TYPE_PARAMS_RE = re.compile(r"\b([A-Za-z_]\w*)\s*<\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*>\s*[({]")
_TYPEISH = {"BIT", "INT", "VARBIT", "TUPLE", "TYPE_IDENT"}
# methods called with explicit type arguments (`pkt.extract<H>(...)`): after `.name` a `<`
# opens type arguments, not a comparison
_GENERIC_METHODS = {"lookahead", "extract", "emit"}


def scan_type_names(text: str) -> set[str]:
    """Every identifier the program (and its includes) declares as a type."""
    names: set[str] = {"packet_in", "packet_out"}
    for rx in _TYPE_DECL_RES:
        names.update(m.group(1) for m in rx.finditer(text))
    # type parameters of generic declarations, e.g. ``extern register<RegT> {``
    for m in _TYPE_PARAMS_RE.finditer(text):
        names.update(x.strip() for x in m.group(2).split(","))
    names -= {"bit", "int", "varbit", "bool", "error"}
    return names


class _PostLex:
    """See module docstring."""

    always_accept = ("IDENT",)

    def __init__(self) -> None:
        self.type_names: set[str] = set()

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth = 0
        prev: Token | None = None
        prev2: Token | None = None
        tn = self.type_names
        for tok in stream:
            t = tok.type
            if t == "IDENT" and tok.value in tn:
                tok = Token.new_borrow_pos("TYPE_IDENT", tok.value, tok)
                t = "TYPE_IDENT"
            elif t == "_LT" and prev is not None:
                if prev.type in _TYPEISH:
                    depth += 1
                elif (prev.type == "IDENT" and prev.value in _GENERIC_METHODS and
                      prev2 is not None and prev2.type == "DOT"):
                    depth += 1
                    tok = Token.new_borrow_pos("GENERIC_LT", "<", tok)
            elif t == "_GT" and depth > 0:
                depth -= 1
            elif t == "SHR" and depth >= 2:
                depth -= 2
                g1 = Token("_GT", ">", tok.start_pos, tok.line, tok.column, tok.line,
                           tok.column + 1, tok.start_pos + 1)
                g2 = Token("_GT", ">", tok.start_pos + 1, tok.line, tok.column + 1, tok.line,
                           tok.column + 2, tok.start_pos + 2)
                yield g1
                prev2, prev = g1, g2
                yield g2
                continue
            prev2, prev = prev, tok
            yield tok


def _table_cache() -> str | bool:
    """Where Lark keeps the LALR tables it built from the grammar, or False (build them each
    time): building takes ~0.5 s, and every switch of a network builds them when its
    pipeline is set (80 at once on a k=8 fat-tree); loading them takes ~0.05 s.  The file is
    a pickle, so it lives only in a folder this user owns and nobody else may write
    (``$PYSWITCH_CACHE_DIR``, default ``~/.cache/pyswitch``); Lark keys it by the grammar,
    the options and its own version, so a changed grammar builds (and writes) new tables."""
    folder = Path(os.environ.get("PYSWITCH_CACHE_DIR") or Path.home() / ".cache" / "pyswitch")
    path = folder / "p4-grammar.lark-cache"
    try:
        private_dir(folder)  # created 0700; ours, nobody else may write it
        if path.is_symlink() or path.exists():
            try:
                check_ours(path.lstat(), str(path), "file")
            except NotOurs:  # never unpickled: removed (the folder is ours), built anew
                path.unlink()
    except OSError:  # not ours (NotOurs), a file in the way, no permission: no cache
        return False
    return str(path)


def _private_tables(cache: str | bool) -> None:
    """Lark writes its tables with the umask's mode: make them 0600."""
    if cache:
        try:
            os.chmod(cache, 0o600)  # in our own folder: checked by _table_cache
        except OSError:
            pass


@functools.lru_cache(maxsize=1)
def _parser() -> tuple[Lark, _PostLex]:
    post = _PostLex()
    cache = _table_cache()
    lark = Lark(_GRAMMAR.read_text(), parser="lalr", lexer="basic", postlex=post,
                propagate_positions=True, maybe_placeholders=True, cache=cache)
    _private_tables(cache)
    return lark, post


def annot_string(arg: object) -> str | None:
    """The quoted text of an annotation argument that is a string literal, else None (the
    grammar parses a string as an expression, as log_msg's argument, `string_lit`)."""
    if isinstance(arg, Tree) and arg.data == "annot_arg" and len(arg.children) == 1:
        arg = arg.children[0]
    if isinstance(arg, Tree) and arg.data == "string_lit":
        return str(arg.children[0])
    return None


def parse(src: Source) -> Tree:
    """Parse preprocessed text; syntax errors become located `P4CompileError`s."""
    lark, post = _parser()
    post.type_names = scan_type_names(src.text)
    try:
        return lark.parse(src.text)
    except UnexpectedToken as e:
        tok = e.token
        what = "end of input" if tok.type == "$END" else repr(str(tok))
        raise src.error(e.line, e.column, f"syntax error: unexpected {what}") from None
    except UnexpectedCharacters as e:
        ch = src.text[e.pos_in_stream] if e.pos_in_stream < len(src.text) else "?"
        raise src.error(e.line, e.column, f"syntax error: unexpected character {ch!r}") from None
    except UnexpectedEOF as e:
        n = src.text.count("\n")
        raise src.error(n, 1, "syntax error: unexpected end of input") from e
    except UnexpectedInput as e:  # pragma: no cover - other lark errors
        raise src.error(getattr(e, "line", 1), getattr(e, "column", 1), "syntax error") from None
