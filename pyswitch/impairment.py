"""Seeded link impairment (loss, duplication, reordering, delay) for pyswitch ports.

`tc netem` does not exist in our kernel, so pyswitch injects link faults itself. This module
is pure logic (no sockets, no clocks): the caller passes the current time and gets back the
frames with the time at which they must be released.

Model, applied to each frame offered to one direction of one port, in this order:

1. **loss**: with probability ``loss`` the frame is dropped (nothing else happens to it).
2. **duplication**: with probability ``dup`` the frame is emitted twice (both copies then go
   through reordering/delay as one unit, so the duplicate directly follows the original).
3. **reordering**: with probability ``reorder`` the frame is *held back* and released right
   after the next frame offered on the same port/direction (the two swap places). A held
   frame is released on its own after ``reorder_hold_ms`` if no other frame comes, so that
   reordering never turns into loss. At most one frame is held at a time.
4. **delay**: every emitted frame is released ``delay_ms`` (+ uniform ``jitter_ms``) after it
   was offered. With zero jitter the delay keeps the order.

All random draws come from one ``random.Random(seed)`` per impairment, drawn in a fixed
order (loss, then dup, then reorder, then jitter), so a given seed and frame sequence always
gives the same outcome — tests are reproducible.  A switch's ports (the daemon names them)
each draw their own stream per direction from that seed (:func:`stream_seed`).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field, fields, replace

_FLOAT_KEYS = ("loss", "dup", "reorder", "delay_ms", "jitter_ms", "reorder_hold_ms")


class ImpairmentSpecError(ValueError):
    """A malformed impairment specification (message says what and where)."""


@dataclass(frozen=True)
class ImpairmentSpec:
    """Parameters of one link impairment. Probabilities are in [0, 1], times in ms."""

    loss: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    reorder_hold_ms: float = 5.0
    seed: int = 0
    direction: str = "both"  # "in" (frames received on the port), "out" (sent), or "both"

    def __post_init__(self) -> None:
        for key in ("loss", "dup", "reorder"):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise ImpairmentSpecError(f"{key}={value}: a probability must be in [0, 1]")
        for key in ("delay_ms", "jitter_ms", "reorder_hold_ms"):
            if getattr(self, key) < 0:
                raise ImpairmentSpecError(f"{key}={getattr(self, key)}: must be >= 0")
        if self.direction not in ("in", "out", "both"):
            raise ImpairmentSpecError(f"dir={self.direction}: must be in, out or both")

    @property
    def is_noop(self) -> bool:
        """True when the impairment can never change a frame's fate or timing."""
        return (
            self.loss == 0 and self.dup == 0 and self.reorder == 0
            and self.delay_ms == 0 and self.jitter_ms == 0
        )

    def to_dict(self) -> dict[str, float | int | str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_text(self) -> str:
        """The ``key=value,...`` form accepted by :func:`parse_spec`."""
        parts = [f"{k}={getattr(self, k):g}" for k in _FLOAT_KEYS]
        return ",".join(parts + [f"seed={self.seed}", f"dir={self.direction}"])


def parse_spec(text: str, base: ImpairmentSpec | None = None) -> ImpairmentSpec:
    """Parse ``loss=0.02,dup=0.01,reorder=0.01,delay_ms=1,jitter_ms=0,seed=7,dir=both``.

    Keys not given keep their value from ``base`` (default: no impairment). ``none`` or an
    empty string resets to no impairment.
    """
    spec = base or ImpairmentSpec()
    text = text.strip()
    if text in ("", "none"):
        return ImpairmentSpec(seed=spec.seed)
    changes: dict[str, float | int | str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ImpairmentSpecError(f"{item!r}: expected key=value")
        try:
            if key in _FLOAT_KEYS:
                changes[key] = float(value)
            elif key == "seed":
                changes[key] = int(value)
            elif key in ("dir", "direction"):
                changes["direction"] = value
            else:
                known = ", ".join((*_FLOAT_KEYS, "seed", "dir"))
                raise ImpairmentSpecError(f"unknown impairment key {key!r} (known: {known})")
        except ValueError as exc:
            if isinstance(exc, ImpairmentSpecError):
                raise
            raise ImpairmentSpecError(f"{key}={value!r}: not a number") from None
    return replace(spec, **changes)  # type: ignore[arg-type]


def parse_port_option(text: str) -> tuple[int | None, ImpairmentSpec]:
    """Parse the command-line form ``PORT:spec`` or ``all:spec`` → (port or None, spec)."""
    where, sep, rest = text.partition(":")
    if not sep:
        raise ImpairmentSpecError(f"--impair {text!r}: expected PORT:key=value,... or all:...")
    where = where.strip()
    if where == "all":
        return None, parse_spec(rest)
    try:
        port = int(where)
    except ValueError:
        raise ImpairmentSpecError(
            f"--impair {text!r}: {where!r} is not a port number or 'all'") from None
    return port, parse_spec(rest)


@dataclass
class ImpairmentCounters:
    """What the impairment did. ``offered`` = passed + dropped + held-now (no dup counted)."""

    offered: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0
    delayed: int = 0
    emitted: int = 0

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class LinkImpairment:
    """One direction of one port. Feed frames with :meth:`offer`, collect expiries with
    :meth:`expire`. Returned lists hold ``(release_time, frame)`` in release order."""

    spec: ImpairmentSpec = field(default_factory=ImpairmentSpec)
    counters: ImpairmentCounters = field(default_factory=ImpairmentCounters)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.spec.seed)
        self._held: list[bytes] | None = None
        self._held_deadline = 0.0

    def reconfigure(self, spec: ImpairmentSpec) -> None:
        """Change parameters; the RNG restarts from the new seed, counters are kept."""
        self.spec = spec
        self._rng = random.Random(spec.seed)

    def _release(self, frames: list[bytes], offered_at: float) -> list[tuple[float, bytes]]:
        spec = self.spec
        out = []
        for frame in frames:
            delay = spec.delay_ms
            if spec.jitter_ms:
                delay += self._rng.uniform(0.0, spec.jitter_ms)
            if delay:
                self.counters.delayed += 1
            out.append((offered_at + delay / 1000.0, frame))
        self.counters.emitted += len(out)
        return out

    def offer(self, frame: bytes, now: float) -> list[tuple[float, bytes]]:
        """Offer one frame at time ``now`` (seconds); return frames to release and when."""
        spec = self.spec
        self.counters.offered += 1
        if spec.loss and self._rng.random() < spec.loss:
            self.counters.dropped += 1
            return self.expire(now)
        copies = [frame]
        if spec.dup and self._rng.random() < spec.dup:
            copies.append(frame)
            self.counters.duplicated += 1
        if self._held is not None:
            # The held frame(s) go right after this one: the pair is swapped.
            held, self._held = self._held, None
            return self._release(copies + held, now)
        if spec.reorder and self._rng.random() < spec.reorder:
            self._held = copies
            self._held_deadline = now + spec.reorder_hold_ms / 1000.0
            self.counters.reordered += 1
            return []
        return self._release(copies, now)

    def next_deadline(self) -> float | None:
        """Time at which a held frame must be released on its own (None if nothing held)."""
        return self._held_deadline if self._held is not None else None

    def expire(self, now: float) -> list[tuple[float, bytes]]:
        """Release a held frame whose hold time has passed."""
        if self._held is not None and now >= self._held_deadline:
            held, self._held = self._held, None
            return self._release(held, self._held_deadline)
        return []


def stream_seed(seed: int, name: str, direction: str) -> int:
    """The random stream of one port's one direction, drawn from the spec's ``seed`` and the
    port's ``name`` (its interface, e.g. ``edge0-eth2``): losses on different ports are then
    independent, as "1 % loss on every port" means, and a run is still reproduced by its
    seed.  One stream everywhere drops the same ordinals of every port's frames, so a network
    that spreads a worker's GRADs evenly over equal-cost paths loses the same chunk on many
    ports at once (docs/results.md, issue 39: the simulated network's ``port_seed``)."""
    return zlib.crc32(f"{seed}/{name}/{direction}".encode())


class PortImpairments:
    """Impairments of every port, both directions. Ports without a spec pass frames as is.

    ``names``: each port's name (the daemon's interfaces): with one, a port's two
    directions draw their own streams (:func:`stream_seed`); a port without a name draws
    ``spec.seed`` itself (tests, a single link)."""

    def __init__(self, names: dict[int, str] | None = None) -> None:
        self._specs: dict[int, ImpairmentSpec] = {}
        self._names = dict(names or {})
        self.rx: dict[int, LinkImpairment] = {}
        self.tx: dict[int, LinkImpairment] = {}

    def set(self, port: int, spec: ImpairmentSpec) -> None:
        """Install/replace the impairment of ``port`` (counters survive a change)."""
        self._specs[port] = spec
        name = self._names.get(port)
        for table, active, way in ((self.rx, spec.direction in ("in", "both"), "in"),
                                   (self.tx, spec.direction in ("out", "both"), "out")):
            own = spec if name is None else replace(spec, seed=stream_seed(spec.seed, name,
                                                                           way))
            if active and not spec.is_noop:
                if port in table:
                    table[port].reconfigure(own)
                else:
                    table[port] = LinkImpairment(own)
            elif port in table:
                # keep counters visible, but make it pass-through
                table[port].reconfigure(ImpairmentSpec(seed=own.seed))

    def spec(self, port: int) -> ImpairmentSpec:
        return self._specs.get(port, ImpairmentSpec())

    def active(self, table: dict[int, LinkImpairment], port: int) -> LinkImpairment | None:
        imp = table.get(port)
        if imp is None or imp.spec.is_noop and imp.next_deadline() is None:
            return None
        return imp

    def next_deadline(self) -> float | None:
        deadlines = [d for table in (self.rx, self.tx) for imp in table.values()
                     if (d := imp.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def snapshot(self) -> dict[str, dict[str, object]]:
        """JSON-able view: per port, its spec and rx/tx counters."""
        ports = sorted(set(self._specs) | set(self.rx) | set(self.tx))
        return {
            str(p): {
                "spec": self.spec(p).to_dict(),
                "rx": self.rx[p].counters.to_dict() if p in self.rx else None,
                "tx": self.tx[p].counters.to_dict() if p in self.tx else None,
            }
            for p in ports
        }
