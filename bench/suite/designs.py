"""The designs the suite compares, as modes of one comparison (docs/suite.md, "Designs").

Every design runs the same workers' vectors (one seeded int32 gradient per worker and round,
the model's scaled size) over the same simulated network (topology, link rates, queues,
impairment, switches) and is checked against the same exact int32 sums.

=============  ================================================================================
``insync``     ``ina.p4``, the planner's placement (``--planner greedy``, ``--budget``) and its
               routes, hash-indexed slots with PS fall-back, congestion control ``fixed``: the
               INA engine's ``ina`` mode
``atp``        ``ina.p4`` on the ToR of every rack holding workers and on the PS's
               (``--planner tor_all``, the budget the number of those racks), PS fall-back on a
               collision, the switches marking ECN (``ecn_packets``: a link queue of 8
               frames; the simulated network) and ``--cc aimd`` halving on those marks
               (ATP's window policy): the ``ina`` mode of a second INA run
``ps_only``    every worker to the PS, no switch aggregates: the INA engine's ``ps_only`` mode
``ring``       host-only ring all-reduce over UDP (:mod:`workers.ring`) through the same
               switches forwarding plain IPv4 (:mod:`controller.experiment.methods.ring.sim`)
``switchml``   ``switchml.p4`` on one switch, the first job's PS's ToR (pool of slots, shadow
               copies, RESULTs multicast from the switch, no PS), every other switch
               forwarding (:mod:`controller.experiment.methods.switchml.sim`)
=============  ================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Design", "DESIGNS", "RUNNABLE", "design_names", "ATP_ECN_PACKETS"]

# ATP's switches mark ECN above a queue threshold; 8 frames of a 1,000-frame queue is what
# docs/results.md ("Congestion marks") measured the policies with
ATP_ECN_PACKETS = 8


@dataclass(frozen=True)
class Design:
    """A design of the comparison: which INA run and mode carries it (``run`` None: not an
    INA-engine mode), its planner and congestion control."""

    name: str
    run: str | None  # the INA run carrying it ("main", "atp") or None
    mode: str | None  # the INA engine's mode in that run
    planner: str = "greedy"
    cc: str = "fixed"
    every_switch: bool = False  # S is every rack of workers (the budget: their count)
    ecn_packets: int = 0  # switches mark INA packets over a link queue this deep (0: off)
    runs_in_sim: bool = True
    what: str = ""


DESIGNS: dict[str, Design] = {d.name: d for d in (
    Design("insync", "main", "ina", what="ina.p4, planned placement (greedy), hash slots, PS "
                                         "fall-back, fixed window"),
    Design("atp", "atp", "ina", planner="tor_all", cc="aimd", every_switch=True,
           ecn_packets=ATP_ECN_PACKETS,
           what="ina.p4 on every workers' rack's ToR and the PS's, PS fall-back, ECN marks, "
                "AIMD window"),
    Design("ps_only", "main", "ps_only", what="every worker to the PS, no aggregation"),
    Design("ring", None, None, what="host-only ring all-reduce over UDP, plain forwarding"),
    Design("switchml", None, None,
           what="switchml.p4 on one switch (the first PS's ToR), pool of slots with shadow "
                "copies, no PS"),
)}
RUNNABLE = tuple(d.name for d in DESIGNS.values() if d.runs_in_sim)


def design_names(text: str) -> tuple[str, ...]:
    """``--designs a,b``: known names in the table's order (ValueError naming a bad one)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in DESIGNS]
    if bad or not names:
        raise ValueError(f"--designs: expected names from {','.join(DESIGNS)}, got {text!r}")
    return tuple(d for d in DESIGNS if d in names)
