"""Helpers turning human-readable addresses into the Python ints pyswitch's API uses."""

from __future__ import annotations

import ipaddress


def mac(text: str) -> int:
    """``"00:11:22:33:44:55"`` -> 48-bit int (most significant byte first)."""
    parts = text.split(":")
    if len(parts) != 6 or not all(1 <= len(p) <= 2 for p in parts):
        raise ValueError(f"not a MAC address: {text!r}")
    return int("".join(p.zfill(2) for p in parts), 16)


def ipv4(text: str) -> int:
    """``"10.0.0.1"`` -> 32-bit int."""
    return int(ipaddress.IPv4Address(text))


def mac_str(value: int) -> str:
    """48-bit int -> ``"00:11:22:33:44:55"``."""
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))


def ipv4_str(value: int) -> str:
    """32-bit int -> dotted quad."""
    return str(ipaddress.IPv4Address(value))
