"""The PS's timer on its NACKs (docs/protocol.md §6, "NACKs and probers"): pure, no I/O
(the caller passes the clock).

A NACK (``workers.ina.ps``, "NACKs") asks a worker for a contribution a switch's flush
lacked.  The PS hears the answer only when it reaches it in some piece, and two common
cases leave it hearing nothing:

* the NACK or its answer is lost on the way (at 1 % loss per port a frame crosses 5-9
  impaired ports each way);
* the answer joins the switch's slot, which still waits for another lost contribution:
  a retransmission that joins an incomplete slot is absorbed there, and nothing goes on.
  Likewise when the PS asks one worker of a point it has heard nothing from and that
  worker's own GRAD was the one lost.

Either way the chunk waited for the prober's next probe or another worker's timer
(fat-tree k=16, 64 workers, 1 % loss, budget 4: 0.2 s and more per such chunk, with 16
chunks in flight the round's time).  So the PS keeps, per open chunk, the workers it
NACKed and has not heard since, and asks them **again** once the round trip it expects
(``wait``: the PS's measured NACK round trip bound, ``ResultCopies.rtt_bound``) has
passed, the i-th time after ``2 ** i`` such waits, at most ``tries`` times.  A worker
that joined the slot then resends into it, and its copy, whose bit the slot holds, makes
the switch flush what it has, so the PS learns who is still missing and asks them; one
whose NACK or answer was lost answers now.  Asks again are flagged RETRANSMIT (a resend)
and a worker answers them even while its last copy is young (``workers.ina.worker``,
``_on_nack``): the PS has waited its round trip already.  A NACK never changes a sum: it
only makes a worker send a copy of the same GRAD again.
"""

from __future__ import annotations

__all__ = ["Reasks"]


class Reasks:
    """Per (round, chunk): the workers NACKed and not heard since, each with when it was
    last asked and how often it was asked again (module docstring)."""

    def __init__(self, tries: int = 3, backoff: float = 2.0) -> None:
        if tries < 0 or backoff < 1:
            raise ValueError("need tries >= 0 and backoff >= 1")
        self.tries, self.backoff = tries, backoff
        # (round, chunk) -> {worker: (when asked last, asks again so far)}
        self._open: dict[tuple[int, int], dict[int, tuple[float, int]]] = {}

    def __len__(self) -> int:
        """Workers waited for, over every open chunk."""
        return sum(len(ws) for ws in self._open.values())

    def asked(self, round_: int, chunk: int, worker: int, now: float) -> None:
        """A NACK went to ``worker`` for ``chunk`` of ``round_`` at ``now`` (from a flush):
        its timer starts again, its count of asks again is kept."""
        ws = self._open.setdefault((round_, chunk), {})
        ws[worker] = (now, ws[worker][1] if worker in ws else 0)

    def heard(self, round_: int, chunk: int, workers: int) -> None:
        """A piece holding the workers of mask ``workers`` arrived: they answered."""
        ws = self._open.get((round_, chunk))
        if not ws:
            return
        for w in [w for w in ws if workers >> w & 1]:
            del ws[w]
        if not ws:
            del self._open[(round_, chunk)]

    def closed(self, round_: int, chunk: int) -> None:
        """The chunk completed: nobody is waited for any more."""
        self._open.pop((round_, chunk), None)

    def round_done(self, round_: int) -> None:
        """Round ``round_`` completed: drop what is kept for it and older rounds."""
        self._open = {k: v for k, v in self._open.items() if k[0] > round_}

    def _at(self, asked: tuple[float, int], wait: float) -> float:
        t, n = asked
        return t + wait * self.backoff ** n

    def next_deadline(self, wait: float | None) -> float | None:
        """When :meth:`due` next has something, with the round trip ``wait`` (None: no
        round trip measured, no timer)."""
        if wait is None:
            return None
        return min((self._at(a, wait) for ws in self._open.values() for a in ws.values()
                    if a[1] < self.tries), default=None)

    def due(self, now: float, wait: float | None) -> list[tuple[int, int, int]]:
        """``(round, chunk, workers mask)`` to ask again at ``now``: each worker whose last
        ask is ``backoff ** i`` times ``wait`` old, ``i`` its asks again so far (fewer than
        ``tries``); their timers restart.  Workers past ``tries`` are left to the workers'
        own timers (kept until heard, never asked again)."""
        if wait is None:
            return []
        out = []
        for (r, c), ws in self._open.items():
            mask = 0
            for w, a in ws.items():
                if a[1] < self.tries and self._at(a, wait) <= now:
                    mask |= 1 << w
                    ws[w] = (now, a[1] + 1)
            if mask:
                out.append((r, c, mask))
        return out
