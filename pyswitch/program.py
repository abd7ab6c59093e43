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
        self.code = p0.code  # the Python back end's output (pyswitch.ir.pyprint)
        self.ir = p0.ir  # the intermediate form the native path lowers from
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
    write_files_atomic([(path, data)])


def write_files_atomic(files: list[tuple[Path, bytes]]) -> None:
    """Write several files all or nothing: each to a temporary file beside it, renamed over
    its path only once every temporary file is complete.  On any failure the temporary files
    (and folders this call created) are removed and the targets keep their old contents --
    a compile whose P4Info cannot be written must not leave a fresh device config that no
    longer matches the P4Info beside it."""
    created: list[Path] = []
    temps: list[tuple[str, Path]] = []
    umask = os.umask(0)
    os.umask(umask)
    try:
        for path, _ in files:
            if path.is_dir():
                raise IsADirectoryError(21, "is a directory", str(path))
            missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
            for d in reversed(missing):
                d.mkdir()
                created.append(d)
        for path, data in files:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; these are ordinary files
        for tmp, path in temps:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:
                pass
        raise


def compile_p4(path: str | os.PathLike[str], include_dirs: Any = (),
               defines: dict[str, Any] | None = None) -> Program:
    """Preprocess, parse, check and compile a P4_16 v1model program."""
    src = preprocess(str(path), list(include_dirs), {k: str(v) for k, v in (defines or {}).items()})
    return Program(src, Path(path).stem)


def load_compiled(path: str | os.PathLike[str]) -> Program:
    """Load what `Program.save` wrote."""
    return Program.from_bytes(Path(path).read_bytes())
