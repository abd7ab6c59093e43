"""`compile_p4` / `load_compiled` / `Program`: the compile output ("device config").

The saved form is JSON holding the preprocessed source and its line map (so errors still
point into the original files); loading recompiles it, which takes a fraction of a second
and means a device config never carries executable code.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from pyswitch.compiler import Compiler
from pyswitch.errors import P4CompileError
from pyswitch.frontend import parse
from pyswitch.p4info.build import build_p4info
from pyswitch.preprocess import Source, preprocess

FORMAT = "pyswitch-device-config/1"


class Program:
    """A compiled v1model program: generated code, run-time metadata and P4Info."""

    def __init__(self, source: Source, name: str = "") -> None:
        self.source = source
        self.name = name
        tree = parse(source)
        p0 = Compiler(source, tree).compile()
        self.code = p0.code
        self.meta = p0.meta
        self.code_obj = compile(self.code, f"<pyswitch:{name or 'program'}>", "exec")
        self.p4info = build_p4info(self.meta)

    # -- serialisation ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        doc = {"format": FORMAT, "name": self.name, "source": self.source.text,
               "linemap": [list(x) for x in self.source.linemap]}
        return json.dumps(doc).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Program:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise P4CompileError("<device config>", 0, 0, f"not a pyswitch device config: {e}")\
                from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise P4CompileError("<device config>", 0, 0, "not a pyswitch device config")
        src = Source(doc["source"], [tuple(x) for x in doc["linemap"]])
        return cls(src, doc.get("name", ""))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the device config atomically (no half-written file on failure)."""
        _atomic_write(Path(path), self.to_bytes())

    def p4info_text(self) -> str:
        return text_format.MessageToString(self.p4info)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def compile_p4(path: str | os.PathLike[str], include_dirs: Any = (),
               defines: dict[str, Any] | None = None) -> Program:
    """Preprocess, parse, check and compile a P4_16 v1model program."""
    src = preprocess(str(path), list(include_dirs), {k: str(v) for k, v in (defines or {}).items()})
    return Program(src, Path(path).stem)


def load_compiled(path: str | os.PathLike[str]) -> Program:
    """Load what `Program.save` wrote."""
    return Program.from_bytes(Path(path).read_bytes())
