"""SwitchML constants, read from ``p4src/include/switchml_constants.p4``.

The file is parsed after ``constants.p4`` (which it includes) with INA's reader
(:func:`workers.ina.constants.parse_constants`), so that what is the same fact -- K values
per packet, the worker-set width -- has one definition, INA's, and SwitchML's own values
are written once, in P4 syntax.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from workers.ina.constants import CONSTANTS_P4, parse_constants

SWITCHML_CONSTANTS_P4: Path = CONSTANTS_P4.parent / "switchml_constants.p4"


@cache
def load() -> dict[str, int]:
    """Every constant of constants.p4 and switchml_constants.p4, parsed once per process."""
    text = CONSTANTS_P4.read_text() + "\n" + SWITCHML_CONSTANTS_P4.read_text()
    return parse_constants(text, f"{CONSTANTS_P4.name} + {SWITCHML_CONSTANTS_P4.name}")


_C = load()

K: int = _C["INA_K"]
"""int32 values per packet (INA's K: the values header is shared)."""
MAX_WORKERS: int = _C["INA_MAX_WORKERS"]
"""Workers per job: width of the per-copy worker bitmap."""
CELLS: int = _C["SWITCHML_CELLS"]
"""Aggregator cells per switch; a job's pool of S slots takes 2 * S of them."""
UDP_PORT: int = _C["SWITCHML_UDP_PORT"]
HDR_BYTES: int = _C["SWITCHML_HDR_BYTES"]
UDP_LEN: int = _C["SWITCHML_UDP_LEN"]
TYPE_UPDATE: int = _C["SWITCHML_TYPE_UPDATE"]
TYPE_RESULT: int = _C["SWITCHML_TYPE_RESULT"]
FLAG_RETRANSMIT: int = _C["SWITCHML_FLAG_RETRANSMIT"]
FLAG_SHADOW: int = _C["SWITCHML_FLAG_SHADOW"]

__all__ = [
    "CELLS", "FLAG_RETRANSMIT", "FLAG_SHADOW", "HDR_BYTES", "MAX_WORKERS",
    "SWITCHML_CONSTANTS_P4", "TYPE_RESULT", "TYPE_UPDATE", "UDP_LEN", "UDP_PORT", "K",
    "load",
]
