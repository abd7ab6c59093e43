"""How many pyswitch switches one process runs (pure: no Mininet, no processes).

A Mininet network of pyswitch switches used to start one ``pyswitch run`` per switch.
At low frame rates a switch frame costs a process wake-up (epoll, ``recvmmsg``, the pipeline,
``sendmmsg``: ~20-25 us against ~3 us batched); with 80 switch processes on two cores each
frame wakes its own.  ``pyswitch run-many`` runs a group of switches in one process and one
forwarding loop; :class:`topo.mininet_switch.PySwitch` starts its switches in groups of
:func:`per_process` switches (:func:`plan_groups`), set by ``PYSWITCH_PER_PROCESS`` or the
switch's ``per_process`` option (``run --switches-per-process``):

* ``1``: one process per switch (each switch can be killed alone: ``--fail-switch``);
* ``N``: groups of at most N switches, consecutive in the network's switch order;
* ``auto`` (the default, :data:`DEFAULT`): :data:`AUTO_MIN_SWITCHES` or fewer switches one
  per process, more as many processes as the machine has cores (docs/scale.md, "Switches
  per process").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

AUTO = "auto"
ENV = "PYSWITCH_PER_PROCESS"
DEFAULT = AUTO
"""When neither the option nor ``PYSWITCH_PER_PROCESS`` says.  Fat-tree k=8 (80 switches, 64
workers, budget 8, a quiet machine, one process per 8 worker hosts): 1 Mbit/s 0.504 s a
round and "cores bind" with one process per switch, 0.345 s and "links bind" grouped;
0.5 Mbit/s 0.647 s against 0.477 s (docs/results.md, "Switches per process")."""
AUTO_MIN_SWITCHES = 32
"""``auto`` leaves networks of this many switches or fewer one process per switch:
``make run``'s 20 (grouped they measured no faster, 0.122 against 0.123 s a round, and
deployed slower, 9.2 against 5.7 s), and a fat-tree k=4's."""


def parse_per_process(text: str) -> int | str:
    """``auto`` or a count >= 1 (``--switches-per-process``, ``PYSWITCH_PER_PROCESS``);
    ValueError with a one-line message otherwise."""
    t = text.strip().lower()
    if t == AUTO:
        return AUTO
    try:
        n = int(t)
    except ValueError:
        raise ValueError(f"switches per process {text!r}: expected a count >= 1 or "
                         f"'{AUTO}'") from None
    if n < 1:
        raise ValueError(f"switches per process {text!r}: expected a count >= 1 or '{AUTO}'")
    return n


def per_process(setting: int | str, n_switches: int, cpus: int) -> int:
    """Switches per process for a network of ``n_switches`` on ``cpus`` cores: the count
    given, or ``auto``'s (module docstring)."""
    if setting != AUTO:
        return max(1, int(setting))
    if n_switches <= AUTO_MIN_SWITCHES:
        return 1
    return max(1, math.ceil(n_switches / max(1, cpus)))


def plan_groups(names: Sequence[str], size: int) -> list[list[str]]:
    """``names`` in consecutive groups of at most ``size``, as even as possible (80
    switches in groups of at most 30: 27, 27, 26), order kept."""
    if size < 1:
        raise ValueError(f"group size must be >= 1, got {size}")
    n = len(names)
    if n == 0:
        return []
    groups = math.ceil(n / size)
    base, extra = divmod(n, groups)
    out, i = [], 0
    for g in range(groups):
        k = base + (1 if g < extra else 0)
        out.append(list(names[i:i + k]))
        i += k
    return out


def counted_once(pids: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Switch name -> process id with each process once, under the first switch that names
    it (a process that runs a group of switches is the group's first switch's): what the
    experiments' CPU accounting sums."""
    out: dict[str, int] = {}
    seen: set[int] = set()
    for name, pid in pids:
        if pid not in seen:
            seen.add(pid)
            out[name] = pid
    return out
