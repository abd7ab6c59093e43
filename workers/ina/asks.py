"""Whom the PS asks to resend a chunk (a NACK), from the workers' schedules; free of I/O.

:class:`workers.ina.ps.PsState` sends the NACKs (docs/protocol.md §6); this module decides
who gets one, in three cases:

* **a flush** (a PARTIAL flagged INCOMPLETE: someone's retransmission found a switch's slot
  waiting) -- :meth:`Asks.after_flush`, the rule of ``workers.ina.ps``, "NACKs";
* **a gap** -- a piece missing behind ``dupthresh`` later chunks of its stream
  (:class:`workers.ina.gaps.GapDetector`): :meth:`Asks.arrived` names one worker of the
  piece, the chunk's prober when it is one of them, whose resend completes its own part or
  makes its switch flush or re-emit what it holds;
* **an overdue chunk** -- later than its neighbours in the send order
  (:class:`workers.ina.gaps.Overdue`, the round's tail a gap cannot show):
  :meth:`Asks.overdue` names the prober when nothing of the chunk came, else one worker of
  each aggregation point nothing came from and the missing workers of a point that flushed.
  Only chunks a switch sums, and only chunks no NACK asked for yet (its recovery runs).

Before gaps and overdue chunks, a lost contribution waited for its prober's first timeout,
which keeps the job's 0.3 s ``timeout`` as a floor (a first copy only queued behind the
start burst must not be resent): at 0.1 % loss per port, k=16, 64 workers, budget 4, that
floor was most of each round (docs/results.md, issue 39).
"""

from __future__ import annotations

from workers.ina.constants import AGG_ID_PS
from workers.ina.gaps import GapDetector, Overdue
from workers.ina.messages import prober

Schedule = list[tuple[int, int, int]]  # (chunk, first aggregation point, fan-in), send order


class Asks:
    """The job's aggregation groups and its loss detectors.

    ``routes``: worker -> its schedule.  ``dupthresh``: the gap rule's later arrivals (None
    or 0: no gaps and no overdue chunks).  ``flat``: a job without an aggregation tree (the
    gap and overdue rules read first aggregation points, which a tree's switches are not).
    """

    def __init__(self, routes: dict[int, Schedule], *, dupthresh: int | None = 3,
                 flat: bool = True) -> None:
        self.groups: dict[int, dict[int, int]] = {}  # chunk -> {point: its workers' mask}
        self.agg_of: dict[tuple[int, int], int] = {}  # (chunk, worker) -> its point
        for w, sched in routes.items():
            for c, a, _ in sched:
                self.agg_of[(c, int(w))] = a
                g = self.groups.setdefault(c, {})
                g[a] = g.get(a, 0) | 1 << int(w)
        self.gaps: GapDetector | None = None
        self.late: Overdue | None = None
        # points whose workers' GRADs reach the PS as they are (no switch sums them):
        # learnt from first copies; their senders' own streams show their gaps
        self.raw_points: set[int] = {AGG_ID_PS}
        orders = {tuple(c for c, _, _ in sched) for sched in routes.values()}
        if flat and dupthresh and len(orders) == 1:
            order = list(orders.pop())  # the workers' common send order
            self.gaps = GapDetector({c: tuple(sorted(self.groups[c].items())) for c in order},
                                    dupthresh)
            self.late = Overdue(order)

    def after_flush(self, c: int, bitmap: int, have: int, mask: int) -> int:
        """The workers a flat job's flush ``bitmap`` of chunk ``c`` asks for (``have``: what
        the PS holds with it).  A flush summing one aggregation point's workers lacks the
        rest of that point's group; of every other point the PS has heard nothing from, one
        worker is asked, whose resend makes that point's switch flush or re-emit what it
        holds (its PARTIAL was lost, or waits for a lost GRAD); workers that send raw to the
        PS, each itself.  A flush from higher up lacks every worker the PS has not got."""
        aggs = set()
        w = bitmap
        while w:
            low = w & -w
            aggs.add(self.agg_of.get((c, low.bit_length() - 1), -1))
            w ^= low
        lack = mask & ~have
        if len(aggs) != 1 or (a := aggs.pop()) in (-1, AGG_ID_PS):
            return lack
        # without the other points' asks a flush of a group that is all there asked nobody,
        # and the chunk waited for the other workers' hold-off (k=16, budget 4, 1 % loss)
        groups = self.groups.get(c, {})
        asked = lack & groups.get(a, 0)
        for point, group in groups.items():
            if point == AGG_ID_PS:
                asked |= lack & group
            elif point != a and not group & have:
                asked |= group & -group
        return asked

    def arrived(self, r: int, c: int, piece: int, raw_from: int | None,
                members: list[int]) -> list[tuple[int, int]]:
        """A first copy of piece ``piece`` of chunk ``c`` reached the PS (``raw_from``: the
        worker, when it is a GRAD as sent): ``(chunk, worker)`` for each chunk of its
        stream now taken as lost, the worker to ask."""
        if self.gaps is None:
            return []
        if raw_from is not None:
            self.raw_points.add(self.agg_of.get((c, raw_from), AGG_ID_PS))
        asks = []
        for lost in self.gaps.arrived(r, c, piece):
            target = prober(members, lost, r)
            if not piece >> target & 1:
                ms = [w for w in members if piece >> w & 1]
                target = ms[(lost + r) % len(ms)]
            asks.append((lost, target))
        return asks

    def overdue(self, r: int, c: int, have: int, mask: int, members: list[int]) -> int:
        """The workers asked for overdue chunk ``c`` of round ``r`` (module docstring)."""
        summed = [g for a, g in self.groups.get(c, {}).items() if a not in self.raw_points]
        if not summed:
            return 0
        if not have:
            return 1 << prober(members, c, r)
        lack, ask = mask & ~have, 0
        for group in summed:
            ask |= lack & group if group & have else group & -group
        return ask
