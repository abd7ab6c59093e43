"""The parameter server's per-round merge state machine (docs/design.md §3.9), free of I/O.

The PS receives, for each (round, chunk), packets that each carry a worker set B (``bitmap``)
and V(B) = the int32 (wrap-around) sum over w in B of worker w's quantized chunk.  They are
PARTIALs from aggregation switches (complete, or flagged INCOMPLETE), GRADs that bypassed the
aggregators (FALLBACK: slot collision), GRADs of the PS-only mode (agg_id 0), retransmitted
GRADs that found no slot holding their key, and duplicates of any of these (network
duplication, switches re-emitting a stored aggregate when a retransmission meets a complete
slot).  The PS must output S = V(F) for the job's full mask F exactly once per chunk: no worker
counted twice, none missing.

Merge rule (the whole correctness argument)
    Every valid packet satisfies V(B) = sum_{w in B} g_w (mod 2^32).  Hence for ANY family of
    received packets whose worker sets are pairwise disjoint and whose union is F (an *exact
    cover* of F), the int32 wrap-around sum of their values is S -- whichever cover is used.  So
    the PS keeps every distinct worker set it has received for the chunk ("pieces", one stored
    value vector per set), and the chunk completes as soon as some exact cover of F exists among
    them.  No packet is ever added into a running total, so nothing can be double counted.

    Classification of an arriving set B against the stored pieces Q (for statistics and
    anomaly reports; the completion test above does not depend on it):

    * B already stored                  -> duplicate: ignored (if its values differ from the
                                           stored ones that is a ``conflict`` anomaly; the
                                           first-received values are kept).
    * B disjoint from every stored Q    -> new piece.
    * B a strict superset of some Q     -> ``superseded``: e.g. a later, larger PARTIAL from the
                                           same aggregator after an INCOMPLETE one; the cover
                                           search prefers larger pieces, so B replaces Q.
    * B a strict subset of some Q       -> ``redundant`` (e.g. a raw retransmission of a worker
                                           whose PARTIAL already arrived): stored, since it may
                                           be needed for a cover if another piece overlaps Q.
    * B partially overlaps some Q (neither contains the other) -> ``overlap`` anomaly.  Not
                                           in a loss-free run, but after a collision: worker 1's
                                           GRAD bypasses switch s and joins s_d's slot {1,4,5};
                                           its retransmission completes s's slot {1,2,3}, whose
                                           PARTIAL overlaps s_d's slot and goes on to the PS;
                                           s_d later flushes {1,4,5} INCOMPLETE.  Both are kept;
                                           the cover search picks a disjoint family once raw
                                           packets arrive: {1,2,3} + {4} + {5} or
                                           {1,4,5} + {2} + {3}.

    Cover search: depth-first exact cover (Knuth's Algorithm X order): take the lowest uncovered
    worker, try the stored pieces that contain it and are disjoint from what is chosen, larger
    pieces first (ties by bitmap value), recurse.  Deterministic; with all singletons of the
    uncovered workers present the first descent succeeds, so backtracking only happens when raw
    packets are missing.  It runs only when the union of stored pieces equals F, and gives up
    after ``cover_budget`` steps (anomaly ``cover_budget``; the next arriving piece retries).
    Stored pieces per chunk are capped at ``max_pieces`` (default 4|W| + 16); beyond the cap
    only singletons (at most |W|, always enough for a cover) are still stored.

Liveness
    The PS can only complete when a cover exists among what reached it; with only
    overlapping sets (e.g. {1,2,3} and {1,4,5}) it must wait.  Raw singletons always make a
    cover, which is why workers send retransmissions straight to the PS (agg_id 0) after a
    few retries (``WorkerRound.direct_after``; tests/ina_sim.py shows the stall without it).

Completion, RESULTs, retransmissions
    A completed chunk yields one RESULT (type RESULT, bitmap F, count |W|, agg_id 0) to
    multicast down the tree; its stored pieces are dropped and S is kept.  Any later GRAD or
    PARTIAL for a completed chunk (a worker's retransmission because a RESULT was lost, or a
    switch re-emitting its stored aggregate) is answered with the stored RESULT again, flagged
    RETRANSMIT (counted ``results_resent``): a worker's own GRAD by a RESULT for that worker
    alone with ``unicast_late`` (``PsOutput.replies``, counted ``results_unicast``; the I/O
    shell sends it to that worker where the network can, docs/protocol.md §6) -- one worker
    asked, so one worker missed it, and a multicast to the job per late request is what
    collapsed 64-worker jobs (docs/simulate.md; many asks of one chunk at once get one
    multicast: :mod:`workers.ina.late_asks`) --, a PARTIAL (a switch's re-emitted or flushed
    aggregate: several workers asked, and the multicast releases the slots on its way) down
    the tree; from the second time a chunk is asked for again, in ``resend_copies`` copies
    (default 2): a chunk asked for twice has a path that loses RESULTs, and at 10 % loss per
    port a RESULT reaches a far worker only about one time in three, so a lost-RESULT
    recovery otherwise needs many round trips.  A round is complete when all its chunks
    are; its full int32 sum vector (n_chunks * K values) is then :meth:`PsState.round_sum`.

NACKs (docs/protocol.md §6)
    With ``routes`` (each worker's schedule: which aggregation point sums its chunk) the PS
    asks single workers to resend a chunk, by a RESULT flagged INCOMPLETE whose bitmap
    leaves the asked worker out and whose values are 0, sent as its header alone
    (``workers.ina.wire.NACK_PAYLOAD_BYTES``; ``PsOutput.nacks``, counted
    ``nacks``), sent to that worker alone, never down the tree (a RESULT there releases the
    slot); the workers resend at once (``workers.ina.worker``, "NACKs and probers").  Whom
    it asks is :mod:`workers.ina.asks`: after a **flush** (a PARTIAL flagged INCOMPLETE:
    someone's retransmission found a switch's slot waiting) the workers the flush lacks --
    in a hierarchical job, those below the switch that emitted it, but none asked for the
    chunk less than the NACK round-trip bound ago and not heard from since
    (``ResultCopies.pending``: every later retransmission reaching the waiting slot
    flushes it again); after a **gap** (a piece
    missing behind later chunks of its stream: ``workers.ina.gaps``, counted ``gaps``) one
    worker of that piece; for an **overdue** chunk (later than its neighbours in the send
    order, found by :meth:`PsState.tick` at :meth:`PsState.next_deadline`, counted
    ``overdue``) its prober or one worker of each silent point -- these two only once a
    flush has shown that a contribution was lost: without loss, chunks of 8 jobs at k=32
    complete out of order enough that the asks' flushes cost 0.918 -> 0.72-0.78 of the
    plan.  A worker's retransmission that reaches the PS raw (``direct_after``: its probes
    no longer reach the slot, whose flushes would ask again) asks again the workers of that
    chunk whose NACK went unanswered for the round-trip bound
    (``ResultCopies.unanswered``).  In a round's last chunks, a worker whose NACK went
    unanswered is asked again by :meth:`PsState.tick` (``ResultCopies.reask``, counted
    ``reasked``; "NACKs asked again" there).  A later request of a completed chunk that names a
    worker (a re-emit or flush its retransmission caused) is answered to that worker alone
    once the first answer went down the tree; more copies only to a worker that asked
    before.

Congestion marks (docs/protocol.md §6)
    A switch marks an INA packet that found its egress queue over the controller's threshold
    (``FLAG_ECN``, p4src/include/congestion.p4).  Aggregation destroys per-packet marks, so, as
    ATP ORs them into its aggregator, the PS ORs the marks of every packet it merges for a
    chunk into the chunk's RESULT (counted ``marked``); every worker of the job then sees it
    (``workers.ina.cc``, ``on_mark``).  Likewise a RESULT carries FALLBACK when a packet of its
    chunk fell back on the way (a slot collision, no aggregator): the aggregators' signal of
    ``two-window`` (``on_fallback``).

Lost RESULTs
    Each new RESULT goes down the tree in as many copies as the measured loss of RESULTs
    asks (:meth:`PsState.copies`; the rule, what counts as a lost RESULT and the top-ups:
    ``workers.ina.result_copies``).  Without loss, or with only delay, nothing is sent twice.
    Counted ``results_doubled``, ``result_copies`` (the extra copies), ``result_topups``.

    **Chained RESULTs** (``chain``, on in the driver): a RESULT and its resends name the
    chunk completed before it in the round (``agg_id``, ``InaPacket.prev_mark``); a worker
    still waiting for that one lost its RESULT and asks at once (``workers.ina.worker``,
    "Chained RESULTs").  A lost RESULT then costs an ask, so copies only keep asks few:
    ``q ** n`` times the deliveries at most ``chain_target`` (0.5) per chunk, at most
    ``chain_copies`` (2), no top-ups; the round's last ``chain_tail`` (4), which no later
    RESULT names soon, go in the rule above's copies, ``max_copies`` once the job showed
    loss (a retransmission or NACK).  Each copy is a frame per chunk on every link of the
    tree, the PS's own and those the plan fills with GRADs: at 1 % loss per port a
    delivery crosses ten impairments (q = 9 %), where the rule asked for 3.6 copies a RESULT;
    two and the asks for what they miss beat that (fat-tree k=16, 64 workers, budget 4,
    twelve seeds: median ratio 0.324 -> 0.383; docs/results.md, "Two copies").

RESULT echo (docs/protocol.md §6)
    Every RESULT names the packet that caused it (the one that completed the chunk, or the
    late one it answers): ``worker_id`` = that packet's ``worker_id`` (``NO_WORKER`` for a
    completion by a member change), ``fan_in`` = 1 + its copy number (GRAD flags bits 4-7)
    when it is a worker's own GRAD, else 0 -- ``workers.ina.wire.Echo``, declared with the
    other meanings of the header fields.  Workers time their copies with it
    (``workers.ina.worker``, "Timeouts"); switches never read these RESULT fields.

Rounds  [decision]
    ``current_round`` is the lowest incomplete round.  Packets of a completed round still kept
    (the last ``keep_done`` completed rounds) get the stored RESULT again; older ones are
    dropped (``stale_round``).  Packets up to ``max_ahead`` rounds ahead of ``current_round``
    are merged into their own round's state (rounds are independent keys, so "buffering" a
    future round is just merging it early); beyond that they are dropped (``future_round``) --
    safe, because the worker retransmits.  Honest synchronous workers cannot run ahead of the
    PS (a worker starts round r+1 only after every RESULT of round r, i.e. after the PS
    completed round r), so ``max_ahead = 1`` only absorbs reordering at the round boundary.

Member changes (docs/design.md §9, a worker that died)  [decision]
    :meth:`PsState.change_members` takes a new member set from the lowest incomplete round E
    on: the PS alone knows E (a round it completed can no longer change), so it picks it and
    the workers learn it from the PS's control record (``workers.ina.control``).  Round E is
    merged again over the new full mask F': its chunks already completed over the old mask are
    re-opened (their RESULTs counted the removed worker), stored pieces holding a removed
    worker are dropped, the others stay (a survivor's quantized gradient is the same when it
    resends the round).  Rounds before E keep their mask for late retransmissions.  The PS also
    tracks when it last heard each member (:meth:`PsState.silent`), so a round stuck because
    one worker's chunks never come is reported, not waited for forever.

Hierarchical jobs (docs/protocol.md §5.1)
    With a :class:`workers.ina.tree.Tree` the switches' bitmaps hold children, not workers:
    each arriving piece is first turned into the set of workers it sums
    (:meth:`Tree.worker_set`: a GRAD its sender, a PARTIAL the workers below the children of
    its bits at the switch that emitted it), and everything above holds of those sets, of any
    size.  A piece the tree cannot read (a switch or a bit it does not have) is malformed
    (``child``).  RESULTs carry the members folded to the bitmap's width
    (:func:`workers.ina.messages.fold_mask`).

Malformed input (docs/design.md §9) is dropped and counted, never raised: wrong job, type not GRAD
or PARTIAL, chunk out of range, wrong number of values, empty worker set or bits outside F, a GRAD
whose bitmap is not exactly its sender's bit, and ``count != popcount(bitmap)`` (a packet whose
count disagrees with its worker set cannot be trusted to hold exactly that set's sum).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import TypeVar

import numpy as np

from workers.ina.asks import Asks
from workers.ina.constants import (
    FLAG_ECN,
    FLAG_FALLBACK,
    FLAG_INCOMPLETE,
    FLAG_RETRANSMIT,
    MAX_WORKERS,
    TYPE_GRAD,
    TYPE_PARTIAL,
)
from workers.ina.constants import K as DEFAULT_K
from workers.ina.cover import CoverBudgetExceeded, find_exact_cover
from workers.ina.late_asks import HOLD, MULTICAST, UNICAST
from workers.ina.messages import fold_mask, mask_of, wrap_sum
from workers.ina.ps_records import Anomaly, ChunkPieces, PsOutput, PsStats, RoundState
from workers.ina.result_copies import ResultCopies
from workers.ina.tree import Tree
from workers.ina.wire import NO_ECHO, NO_WORKER, Echo, InaPacket

# a packet of a recovery, not of a stream's first delivery (workers.ina.gaps)
_RECOVERY = FLAG_RETRANSMIT | FLAG_INCOMPLETE | FLAG_FALLBACK
_ESCAPED = FLAG_RETRANSMIT | FLAG_FALLBACK  # a worker's retransmission that came raw


V = TypeVar("V")


def _in_force(changes: list[tuple[int, V]], round_: int) -> V:
    """The value of ``changes`` (``(from_round, value)``, the first from the first round, in
    order) in force in ``round_``."""
    out = changes[0][1]
    for start, v in changes:
        if start <= round_:
            out = v
    return out


class PsState:
    """Merge state of one job at the PS (see module docstring for the rules).

    ``worker_ids``: the job's workers (bit i <-> worker i, i < 64 in a flat job).
    ``n_chunks``: chunks per round (the gradient is n_chunks * k int32 values, zero-padded).
    ``k``: values per packet.  ``tree``: a hierarchical job's aggregation tree (module doc).
    """

    def __init__(
        self,
        job_id: int,
        worker_ids: Iterable[int],
        n_chunks: int,
        k: int = DEFAULT_K,
        *,
        first_round: int = 0,
        keep_done: int = 2,
        max_ahead: int = 1,
        max_pieces: int | None = None,
        cover_budget: int = 100_000,
        max_anomalies: int = 1000,
        resend_copies: int = 2,
        unicast_late: bool = False,
        routes: dict[int, list[tuple[int, int, int]]] | None = None,
        lost_target: float = 1.0,
        max_copies: int = 4,
        tree: Tree | None = None,
        chain: bool = False,
        chain_target: float = 0.5,
        chain_tail: int = 4,
        chain_copies: int = 2,
        detect_loss: bool = True,
    ) -> None:
        ids = sorted(set(int(w) for w in worker_ids))
        if not ids:
            raise ValueError("a job needs at least one worker")
        top = MAX_WORKERS if tree is None else NO_WORKER
        if ids[0] < 0 or ids[-1] >= top:
            raise ValueError(f"worker ids must be in [0, {top}), got {ids[0]}..{ids[-1]}")
        self.tree = tree  # the newest; _trees: (from round, tree), oldest first
        self._trees: list[tuple[int, Tree]] = [(first_round, tree)] if tree is not None else []
        if n_chunks < 1 or k < 1:
            raise ValueError(f"n_chunks and k must be >= 1, got {n_chunks}, {k}")
        if keep_done < 0 or max_ahead < 0:
            raise ValueError("keep_done and max_ahead must be >= 0")
        self.job_id = job_id
        self.worker_ids = ids
        self.full_mask = mask_of(ids)
        self.n_workers = len(ids)
        self.n_chunks = n_chunks
        self.k = k
        self.first_round = first_round
        self.keep_done = keep_done
        self.max_ahead = max_ahead
        self.max_pieces = max_pieces if max_pieces is not None else 4 * len(ids) + 16
        self.cover_budget = cover_budget
        self.max_anomalies = max_anomalies
        if resend_copies < 1:
            raise ValueError(f"resend_copies must be >= 1, got {resend_copies}")
        self.resend_copies = resend_copies
        self.unicast_late = unicast_late  # late GRADs answered in PsOutput.replies
        # "Lost RESULTs": the loss meter of the RESULT copies
        # a round's tail is one fact: its last chain_tail chunks (copies and asks again)
        self.result_copies = ResultCopies(n_chunks, lost_target, max_copies, tail=chain_tail)
        # "Chained RESULTs" (module docstring); _lossy: a retransmission or NACK seen
        self.chain = chain
        self.chain_target = chain_target  # lost deliveries a round may expect, per chunk
        self.chain_tail = chain_tail  # a round's last RESULTs, in copies
        if chain_copies < 1:
            raise ValueError(f"chain_copies must be >= 1, got {chain_copies}")
        self.chain_copies = chain_copies  # the most copies of the others
        self._lossy = False
        # whom a NACK asks (``routes``: worker -> [(chunk, agg_id, fan_in)]), with the
        # gap and overdue detectors; None: no NACKs (module docstring, "NACKs")
        self._asks = (Asks(routes, detect=detect_loss, flat=tree is None)
                      if routes is not None else None)
        self.current_round = first_round
        self.stats = PsStats()
        self.anomalies: list[Anomaly] = []
        self._rounds: dict[int, RoundState] = {}
        # (from_round, full mask) of every member change, oldest first (change_members)
        self._masks: list[tuple[int, int]] = [(first_round, self.full_mask)]
        self.removed_mask = 0  # every worker ever removed from the job
        self._heard: dict[int, float] = {}  # worker -> when a packet last held its bit
        # the RESULT echo (docs/protocol.md §6) of the packet being merged
        self._echo = NO_ECHO
        self._emitter: int | None = None
        self._now: float | None = None  # the clock of the packet being merged

    # -- queries ---------------------------------------------------------------------------

    def is_round_complete(self, round_: int) -> bool:
        rs = self._rounds.get(round_)
        return rs is not None and rs.complete

    def round_sum(self, round_: int) -> np.ndarray:
        """The completed round's full int32 sum vector (n_chunks * k values, a copy)."""
        rs = self._rounds.get(round_)
        if rs is None or not rs.complete:
            raise KeyError(f"round {round_} is not complete (or no longer kept)")
        return rs.sums.reshape(-1).copy()

    def missing(self, round_: int) -> dict[int, int]:
        """For each incomplete chunk of ``round_``: the mask of workers not yet received."""
        rs = self._rounds.get(round_)
        if rs is None:
            return dict.fromkeys(range(self.n_chunks), self.mask_for(round_))
        out = {}
        for c in range(self.n_chunks):
            if not rs.done[c]:
                ch = rs.chunks.get(c)
                out[c] = rs.mask & ~(ch.union if ch else 0)
        return out

    def mask_for(self, round_: int) -> int:
        """The full mask of ``round_`` (the member set in force then)."""
        return _in_force(self._masks, round_)

    def silent(self, now: float, timeout: float) -> list[int]:
        """Members the lowest incomplete round still lacks in some chunk and that no packet
        has named for ``timeout`` seconds (the clock starts with the first packet heard, so
        the start barrier never counts).  A live worker retransmits an unanswered chunk at
        least every ``max_timeout`` (1 s), so a long silence means it is gone (§9)."""
        if not self._heard or timeout <= 0:
            return []
        lacking = 0
        for m in self.missing(self.current_round).values():
            lacking |= m
        start = min(self._heard.values())
        return [w for w in self.worker_ids
                if lacking >> w & 1 and now - self._heard.get(w, start) > timeout]

    # -- member changes --------------------------------------------------------------------

    def change_members(self, worker_ids: Iterable[int]) -> tuple[int, PsOutput]:
        """From the lowest incomplete round E on, the job's members are ``worker_ids`` (a
        subset of the current ones: workers only leave).  Returns E and what completes at
        once (chunks whose stored pieces from survivors already cover F')."""
        ids = sorted(set(int(w) for w in worker_ids))
        if not ids or not set(ids) <= set(self.worker_ids):
            raise ValueError(f"new members {ids} must be a non-empty subset of "
                             f"{self.worker_ids}")
        e = self.current_round
        removed = self.full_mask & ~mask_of(ids)
        self.worker_ids, self.full_mask, self.n_workers = ids, mask_of(ids), len(ids)
        self.removed_mask |= removed
        self._masks.append((e, self.full_mask))
        for w in list(self._heard):
            if removed >> w & 1:
                del self._heard[w]
        out = PsOutput()
        self._echo, self._now = NO_ECHO, None
        for r in [r for r in self._rounds if r >= e]:
            old = self._rounds.pop(r)
            rs = self._rounds[r] = RoundState(self.n_chunks, self.k, self.full_mask)
            for c, ch in old.chunks.items():
                keep = {b: v for b, v in ch.pieces.items() if not b & removed}
                if keep:
                    new = rs.chunks[c] = ChunkPieces()
                    new.pieces = keep
                    for b in keep:
                        new.union |= b
                    self._try_complete(r, rs, c, new, out)
        return e, out

    def change_tree(self, tree: Tree, from_round: int) -> None:
        """A hierarchical job's tree from round ``from_round`` on (a fail-over re-assigned
        it, docs/protocol.md §5.1): the pieces of each round are read with that round's
        tree, since a switch's bit names a different set of workers in the new one."""
        if self.tree is None:
            raise ValueError("a flat job has no tree to change")
        self._trees = [(r, t) for r, t in self._trees if r < from_round] + [(from_round, tree)]
        self.tree = tree

    def tree_of(self, round_: int) -> Tree:
        """The tree round ``round_``'s pieces are read with (:meth:`change_tree`)."""
        return _in_force(self._trees, round_)

    # -- the state machine -----------------------------------------------------------------

    def on_packet(self, pkt: InaPacket, now: float | None = None) -> PsOutput:
        """Take one decoded packet; return the RESULTs to send and rounds that completed.
        ``now`` (any monotone clock; optional) feeds :meth:`silent`."""
        out = PsOutput()
        self._emitter = None  # a hierarchical PARTIAL's emitting switch (_nack)
        self._now = now
        if self.tree is not None and pkt.msg_type in (TYPE_GRAD, TYPE_PARTIAL):
            raw = pkt.bitmap
            got = self.tree_of(pkt.round).worker_set(pkt.msg_type, pkt.worker_id, raw,
                                                     pkt.count)
            if got is None or (pkt.msg_type == TYPE_GRAD and raw != 0):
                self.stats.malformed += 1
                self.stats.malformed_reasons["child"] = (
                    self.stats.malformed_reasons.get("child", 0) + 1)
                return out
            # the piece as the workers it sums; a PARTIAL's worker_id names a switch, so
            # the RESULT it causes echoes no worker
            if pkt.msg_type == TYPE_PARTIAL:
                self._emitter = pkt.worker_id
            pkt = replace(pkt, bitmap=got, count=got.bit_count(),
                          worker_id=pkt.worker_id if pkt.msg_type == TYPE_GRAD else NO_WORKER)
        why = self._check(pkt)
        if why:
            self.stats.malformed += 1
            self.stats.malformed_reasons[why] = self.stats.malformed_reasons.get(why, 0) + 1
            return out
        st = self.stats
        st.packets += 1
        if now is not None:
            b = pkt.bitmap
            while b:
                low = b & -b
                self._heard[low.bit_length() - 1] = now
                b ^= low
        if pkt.msg_type == TYPE_GRAD:
            st.grads += 1
        else:
            st.partials += 1
        if pkt.flags & FLAG_FALLBACK:
            st.fallbacks += 1
        if pkt.flags & FLAG_RETRANSMIT:
            st.retransmits += 1
            self._lossy = True
        flushed = pkt.msg_type == TYPE_PARTIAL and pkt.flags & FLAG_INCOMPLETE
        if flushed:  # (a GRAD flagged so answers a point's NACK)
            st.incomplete += 1

        r, c = pkt.round, pkt.chunk_id
        self._echo = Echo.of(pkt)  # echoed in the RESULTs this packet causes
        rs = self._rounds.get(r)
        if r < self.current_round and rs is None:
            st.stale_round += 1
            return out
        if r > self.current_round + self.max_ahead:
            st.future_round += 1
            return out
        if rs is None:
            rs = self._rounds[r] = RoundState(self.n_chunks, self.k, self.mask_for(r))
        if rs.done[c]:
            st.late += 1
            if pkt.msg_type == TYPE_GRAD and rs.mask >> pkt.worker_id & 1:
                # a worker's own ask: a lost RESULT if it cannot have crossed it ("Lost
                # RESULTs", workers.ina.result_copies)
                w, sent = pkt.worker_id, float(rs.sent_at[c])
                since = None if now is None or math.isnan(sent) else now - sent
                self.result_copies.late_grad(r, c, w, pkt.copy_number, int(rs.copies[c]),
                                             since)
            rs.resent[c] += 1
            w = pkt.worker_id
            named = 0 <= w < MAX_WORKERS and rs.mask >> w & 1
            how = (rs.late.answer(c, now) if self.unicast_late and named and now is not None
                   else UNICAST)
            if how == HOLD:  # one answer to many asks is on its way (workers.ina.late_asks)
                return out
            st.results_resent += 1
            res = self._result(r, c, rs.sums[c], resent=True)
            if how == MULTICAST:
                st.results_late_multicast += 1
                out.results.append(res)
            elif self.unicast_late and named and (pkt.msg_type == TYPE_GRAD or rs.resent[c] > 1):
                # one worker asked (its own GRAD, or its retransmission made a switch
                # re-emit or flush once the first answer went down the tree and released
                # the slots): that worker alone, in more copies when it asked before
                copies = self.resend_copies if rs.asked[c] >> w & 1 else 1
                rs.asked[c] |= 1 << w
                st.results_unicast += 1
                out.replies.extend([(w, res)] * copies)
            else:
                # a chunk asked for again has a lossy path to some worker: from its second
                # resend on, send more copies (the module docstring)
                out.results.extend([res] * (self.resend_copies if rs.resent[c] > 1 else 1))
            return out

        if pkt.flags & FLAG_ECN:  # congestion marks: ORed into the chunk's RESULT
            rs.marked[c] = True
        if pkt.flags & FLAG_FALLBACK:  # so are fall-backs (module docstring)
            rs.fell[c] = True
        if now is not None and rs.nacked[c] & pkt.bitmap:  # a NACK's round trip
            self.result_copies.heard(r, c, pkt.bitmap, now)
        if self._asks is not None and not pkt.flags & _RECOVERY and now is not None:
            # a first copy: the gaps it shows are asked for at tick()
            raw = pkt.worker_id if pkt.msg_type == TYPE_GRAD else None
            self._asks.arrived(r, c, pkt.bitmap, raw, now)
        ch = rs.chunks.get(c)
        if ch is None and pkt.bitmap == rs.mask:
            rs.sums[c] = pkt.values  # fast path: the whole sum in one packet (normal INA)
            self._complete(r, rs, c, out)
        else:
            if ch is None:
                ch = rs.chunks[c] = ChunkPieces()
            if self._store(ch, pkt):
                self._try_complete(r, rs, c, ch, out, pkt.bitmap)
            if flushed and not rs.done[c]:
                self._nack(r, rs, c, pkt, out)
            elif (pkt.msg_type == TYPE_GRAD and pkt.flags & _ESCAPED == _ESCAPED
                    and rs.nacked[c] and now is not None and not rs.done[c]):
                # a worker's retransmission that came raw: its probes no longer reach the
                # slot that waits, whose flushes would ask again whom a lost NACK asked
                again = self.result_copies.unanswered(r, c, now) & ~pkt.bitmap
                if again:
                    self._send_nacks(r, rs, c, again, out)
        return out

    def _nack(self, r: int, rs: RoundState, c: int, pkt: InaPacket, out: PsOutput) -> None:
        """A switch flushed an incomplete aggregate of chunk ``c`` (someone's retransmission
        found it waiting): ask the workers it lacks to resend (:meth:`Asks.after_flush`; in
        a hierarchical job, the workers below the switch that emitted it)."""
        if self._asks is None:
            return
        ch = rs.chunks.get(c)
        have = pkt.bitmap | (ch.union if ch else 0)
        if self.tree is not None:
            # a hierarchical flush lacks the workers below the switch that emitted it
            below = self.tree_of(r).workers_below(self._emitter) if self._emitter else 0
            ask = rs.mask & ~have & below
        else:
            ask = self._asks.after_flush(c, pkt.bitmap, have, rs.mask)
        if self._now is not None:
            # a worker asked less than a round trip ago may be answering: every later
            # retransmission reaching the slot flushed it again, and the same worker was
            # asked up to 12 times for one chunk (k=16, budget 4, 1 % loss)
            ask &= ~self.result_copies.pending(r, c, self._now)
        if ask and ask != rs.mask:
            self._send_nacks(r, rs, c, ask, out)

    def next_deadline(self) -> float | None:
        """When :meth:`tick` may next find a lost piece, an overdue chunk or a NACK to ask
        again (None: no need)."""
        if self._asks is None:
            return None
        rs = self._rounds.get(self.current_round)
        reask = (self.result_copies.reask_due(self.current_round, rs.left)
                 if rs is not None else None)
        due = [t for t in (self._asks.next_deadline(), reask) if t is not None]
        return min(due) if due else None

    def tick(self, now: float) -> PsOutput:
        """Ask for the pieces taken as lost and the chunks overdue at ``now``
        (:mod:`workers.ina.asks`); an overdue chunk a NACK asked for already is not asked
        for again (its recovery runs)."""
        out = PsOutput()
        if self._asks is None:
            return out
        # found either way (what is found is not a sample of the reordering), asked for
        # only once a flush showed a contribution lost (module docstring, "NACKs")
        lost = self._asks.lost(now, self.worker_ids)
        late = self._asks.late.overdue(now) if self._asks.late is not None else []
        self._now = now
        rs = self._rounds.get(self.current_round)
        if rs is not None:  # NACKs (or their answers) lost in the round's tail ("NACKs")
            for c, again in self.result_copies.reask(self.current_round, rs.left, now).items():
                if not rs.done[c]:
                    self._send_nacks(self.current_round, rs, c, again, out, "reasked")
        if not self.stats.incomplete:
            return out
        for r, c, piece, w in lost:
            rs = self._rounds.get(r)
            ch = rs.chunks.get(c) if rs is not None else None
            if rs is not None and not rs.done[c] and not (ch is not None and ch.union & piece):
                self._send_nacks(r, rs, c, 1 << w, out, "gaps")
        r = self.current_round
        rs = self._rounds.get(r)
        if self._asks.late is None or self._asks.late.round != r or rs is None:
            return out
        for c in late:
            if not rs.done[c] and not rs.nacked[c]:
                ch = rs.chunks.get(c)
                ask = self._asks.overdue(r, c, ch.union if ch else 0, rs.mask, self.worker_ids)
                if ask:
                    self._send_nacks(r, rs, c, ask, out, "overdue")
        return out

    def _send_nacks(self, r: int, rs: RoundState, c: int, ask: int, out: PsOutput,
                    why: str | None = None) -> None:
        """NACK each worker of ``ask`` for chunk ``c``: a RESULT flagged INCOMPLETE whose
        bitmap (every other worker; folded, one per worker, in a hierarchical job) leaves
        the asked worker's bit out, which no worker takes for a sum.  ``why``: the stats
        counter of a gap or an overdue chunk."""
        present = rs.mask & ~ask
        zero = np.zeros(self.k, dtype=np.int32)
        # a gap's or an overdue chunk's ask is flagged RETRANSMIT: the chunks sent after
        # it arrived, so no copy of it is still on its way ("now", workers.ina.worker)
        flags = FLAG_INCOMPLETE | (FLAG_RETRANSMIT if why is not None else 0)
        nack = InaPacket.result(self.job_id, r, c, present, zero, flags=flags)
        while ask:
            low = ask & -ask
            if self.tree is not None:
                # the present set folded to the bitmap's width, the asked worker's folded
                # bit cleared: one NACK per worker (it goes to that worker alone)
                nack = InaPacket.result(self.job_id, r, c,
                                        fold_mask(present) & ~fold_mask(low), zero,
                                        flags=flags)
            out.nacks.append((low.bit_length() - 1, nack))
            self.stats.nacks += 1
            if why is not None:
                setattr(self.stats, why, getattr(self.stats, why) + 1)
            self.result_copies.nacked(r, int(why != "reasked"), c,  # (one loss: once)
                                      low.bit_length() - 1, self._now)
            self._lossy = True
            rs.nacked[c] |= low
            ask ^= low

    def _try_complete(self, r: int, rs: RoundState, c: int, ch: ChunkPieces, out: PsOutput,
                      bitmap: int = 0) -> None:
        """Complete chunk ``c`` if an exact cover of the round's mask is stored."""
        if ch.union & rs.mask != rs.mask:
            return
        try:
            cover = find_exact_cover(ch.pieces, rs.mask, self.cover_budget)
        except CoverBudgetExceeded as exc:
            self._anomaly(r, c, "cover_budget", bitmap, str(exc))
            return
        if cover is None:
            return
        rs.sums[c] = wrap_sum([ch.pieces[b] for b in cover])
        del rs.chunks[c]
        self._complete(r, rs, c, out)

    def _complete(self, r: int, rs: RoundState, c: int, out: PsOutput) -> None:
        st = self.stats
        rs.done[c] = True
        rs.n_done += 1
        late = self._asks.late if self._asks is not None else None
        if late is not None and self._now is not None and r == self.current_round:
            late.completed(r, c, self._now)
        st.chunks_completed += 1
        st.results_sent += 1
        self.result_copies.completed(r, c)
        if self.chain:
            rs.prev[c], rs.last = rs.last, c
        res = self._result(r, c, rs.sums[c], resent=False)
        if rs.marked[c]:
            st.marked += 1
            res = replace(res, flags=res.flags | FLAG_ECN)
        if rs.fell[c]:
            res = replace(res, flags=res.flags | FLAG_FALLBACK)
        n = self.copies(r)
        if self.chain:
            # the next RESULT names this one; the round's last few have no next soon
            tail = rs.left < self.chain_tail
            n = (min(self.copies(r, self.n_chunks * self.chain_target), self.chain_copies)
                 if not tail
                 else max(n, self.result_copies.max_copies if self._lossy else 1))
        out.results.extend([res] * n)
        rs.copies[c] = n
        rs.fewest = n if not rs.fewest else min(rs.fewest, n)
        if not self.chain:
            self._top_up(r, n, out)
        if self._now is not None:
            rs.sent_at[c] = self._now
        self.result_copies.sent(r, n, rs.mask.bit_count())
        if n > 1:
            st.results_doubled += 1
            st.result_copies += n - 1
        if rs.complete:
            st.rounds_completed += 1
            self.result_copies.round_done(r)
            out.completed_rounds.append(r)
            self._advance()

    def _top_up(self, r: int, n: int, out: PsOutput) -> None:
        """The estimate asks for ``n`` copies: RESULTs of round ``r`` and the one before
        sent in fewer get the missing ones now, flagged RETRANSMIT, echoing no packet (no
        worker takes a round-trip sample from them; ``workers.ina.result_copies``)."""
        for rr in (r - 1, r):
            rs = self._rounds.get(rr)
            if rs is None or not rs.fewest or rs.fewest >= n:
                continue
            for c in np.flatnonzero(rs.done & (rs.copies < n)):
                m = int(rs.copies[c])
                vals = rs.sums[c].view()
                vals.setflags(write=False)
                flags = (FLAG_RETRANSMIT | (FLAG_ECN if rs.marked[c] else 0)
                         | (FLAG_FALLBACK if rs.fell[c] else 0))
                res = InaPacket.result(self.job_id, rr, int(c), fold_mask(rs.mask), vals,
                                       flags=flags)
                out.results.extend([res] * (n - m))
                rs.copies[c] = n
                self.stats.result_topups += n - m
                self.result_copies.topped_up(m, n, rs.mask.bit_count())
            rs.fewest = n

    def copies(self, r: int, lost_target: float | None = None) -> int:
        """How many copies of a new RESULT of round ``r`` go down the tree (module
        docstring, "Lost RESULTs"), for ``lost_target`` lost deliveries a round (default:
        the meter's)."""
        return self.result_copies.copies(r, self.mask_for(r).bit_count(), lost_target)

    # -- internals -------------------------------------------------------------------------

    def _check(self, pkt: InaPacket) -> str | None:
        if pkt.msg_type not in (TYPE_GRAD, TYPE_PARTIAL):
            return "type"
        if pkt.job_id != self.job_id:
            return "job"
        if not 0 <= pkt.chunk_id < self.n_chunks:
            return "chunk"
        if pkt.round < self.first_round:
            return "round"
        b = pkt.bitmap
        if b > 0 and b & self.removed_mask and pkt.round >= self._masks[-1][0]:
            return "removed_member"  # §9: a worker that left the job (late or stray)
        if b <= 0 or b & ~self.mask_for(pkt.round):
            return "bitmap"
        if pkt.msg_type == TYPE_GRAD and b != 1 << pkt.worker_id:
            return "grad_bitmap"
        if pkt.count != b.bit_count():
            return "count"
        v = pkt.values
        if not isinstance(v, np.ndarray) or v.shape != (self.k,) or v.dtype != np.int32:
            return "values"
        return None

    def _store(self, ch: ChunkPieces, pkt: InaPacket) -> bool:
        """Add the packet's piece to the chunk; False if it added nothing new."""
        st, b = self.stats, pkt.bitmap
        old = ch.pieces.get(b)
        if old is not None:
            st.duplicates += 1
            if not np.array_equal(old, pkt.values):
                st.conflicts += 1
                self._anomaly(pkt.round, pkt.chunk_id, "conflict", b,
                              "same worker set, different values; first kept")
            return False
        if b & ch.union:
            sup = sub = ovl = False
            for q in ch.pieces:
                if b & q:
                    if b & q == q:
                        sup = True
                    elif b & q == b:
                        sub = True
                    else:
                        ovl = True
            st.superseded += sup
            st.redundant += sub
            if ovl:
                st.overlaps += 1
                self._anomaly(pkt.round, pkt.chunk_id, "overlap", b,
                              "partially overlaps a stored piece")
        if len(ch.pieces) >= self.max_pieces and b.bit_count() > 1:
            st.pieces_dropped += 1
            self._anomaly(pkt.round, pkt.chunk_id, "pieces_cap", b, f"over {self.max_pieces}")
            return False
        vals = pkt.values.copy()
        vals.setflags(write=False)
        ch.pieces[b] = vals
        ch.union |= b
        return True

    def _result(self, r: int, c: int, values: np.ndarray, resent: bool) -> InaPacket:
        mask = self.mask_for(r)
        vals = values.view()  # a row of the round's sums, never written again
        vals.setflags(write=False)
        rs = self._rounds.get(r)  # "Chained RESULTs": prev -1 (none) without chain
        return InaPacket.result(self.job_id, r, c, fold_mask(mask), vals,
                                flags=FLAG_RETRANSMIT if resent else 0, echo=self._echo,
                                prev=int(rs.prev[c]) if rs is not None else None)

    def _advance(self) -> None:
        while (rs := self._rounds.get(self.current_round)) is not None and rs.complete:
            self.current_round += 1
        horizon = self.current_round - self.keep_done
        if self._asks is not None and self._asks.gaps is not None:
            self._asks.gaps.forget(self.current_round)
        for r in [r for r in self._rounds if r < horizon]:
            del self._rounds[r]

    def _anomaly(self, r: int, c: int, kind: str, bitmap: int, detail: str) -> None:
        if len(self.anomalies) < self.max_anomalies:
            self.anomalies.append(Anomaly(r, c, kind, bitmap, detail))
