"""Clustered temporary-PS synchronization, transport-free (docs/design.md §7 steps 5–7).

Nothing here does I/O.  The gradient rules, the temporary PS's state machine
(:class:`TemporaryPS`), the message pattern of a period and its bytes per link, and an
in-process simulation (:func:`simulate`) that drives TemporaryPS objects and trains the real
model of :mod:`workers.common.model` with every method; a Mininet runner only has to carry the same
messages between processes.

One exchange period (B batches; K clusters; cluster c has members M_c and temporary PS s_c)
    * batch b = 0 … B−1 (global round r = p·B + b, so every worker reads the same batches as in
      the central-PS reference of :mod:`workers.common.model`): every member computes its gradient
      at its parameters and sends it to s_c; s_c averages them:  ḡ_c = (1/|M_c|) Σ_{m∈M_c} g_m.
    * batches 0 … B−2: s_c sends ḡ_c back and every member applies it (one SGD step).
    * batch B−1 (the last average of the period counts, docs/design.md §7 step 5): the temporary PSs
      exchange their ḡ_c (every PS sends its average to every other PS); each computes its
      combined gradient u_c (below) and sends it to its members, who apply it.
    Members of a cluster start identical and apply identical gradients, so they stay identical
    (asserted by the tests).  Different clusters drift apart between exchanges.

Contribution rule  [decision, docs/design.md §7 step 6]
    After exchange t the contribution of cluster j to cluster i is

        c_ij(t) = Σ_{τ ≤ t} max(0, cos(ḡ_i(τ), ḡ_j(τ)))          (i ≠ j; c_ii is unused)

    -- the accumulated *positive* cosine similarity of their averages: a cluster whose averages
    keep pointing the same way as ours has contributed; one that points away has not.  The
    current exchange counts (``include_current=True``, the default): it is the one that was just
    received, and without it nothing would be mixed in the first period.  ``False`` uses only
    strictly earlier periods (the literal reading of "all previous periods").

    Normalization of α  [decision]: docs/design.md §7 says "α_ij the normalized
    accumulated contributions".  Two readings are implemented:

    * ``"mean"`` (default): α_ij = c_ij / T, T = number of exchanges accumulated, i.e. the mean
      positive cosine similarity, in [0, 1].  A cluster that always agrees gets weight 1 (as in a
      plain average), one that never agrees gets 0.
    * ``"sum"``: α_ij = c_ij / Σ_{k≠i} c_ik (α_i· = 0 while all c_i· are 0).  Then Σ_j α_ij = 1
      whenever anything contributed, the own average always has weight 1/2, and with K = 2
      clusters the rule collapses to the plain average as soon as c_12 > 0 -- which is why it is
      not the default: it cannot distinguish a helpful cluster from a barely-agreeing one.

    The updated gradient of cluster i is

        u_i = (ḡ_i + Σ_{j≠i} α_ij ḡ_j) / (1 + Σ_{j≠i} α_ij).

Plain-average baseline
    u_i = (1/K) Σ_j ḡ_j for every cluster: the contribution formula with every α_ij = 1 (each
    cluster average counts once, whatever its size).

Central PS baseline
    One PS averages all N gradients after every batch and every worker applies the average: the
    synchronous reference :func:`workers.common.model.train_synchronous` (which this module calls).

Bytes per link
    A message pattern is a list of (source host, destination host, bytes) unicast messages.
    :func:`link_bytes` puts each message on the path its TCP packets take: the /32 host routes
    the controller installs (:func:`topo.paths.route_path`, one equal-cost next hop per switch
    and destination), so the busiest-link load of the cluster method and of a central PS are
    computed on the same graph and the same routes as the network runs.
    A gradient message is ``n_params × 4`` bytes (float32, no headers); the per-batch update
    sent back to members is the same size (a gradient, not the parameters).  The contribution
    state handed to a newly elected PS (K² floats) is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import networkx as nx
import numpy as np

from topo.models import natural_key
from topo.paths import route_path
from workers.cluster.clustering import ps_schedule
from workers.common.data import Dataset
from workers.common.model import Replica, TrainConfig, load_data, mean_sync, train_synchronous

__all__ = [
    "ContributionTracker",
    "Message",
    "SimResult",
    "TemporaryPS",
    "busiest_link",
    "central_period_messages",
    "cluster_period_messages",
    "combine",
    "combine_all",
    "link_bytes",
    "plain_average",
    "positive_cosine",
    "simulate",
]

Normalization = Literal["mean", "sum"]
Method = Literal["contribution", "average", "central"]
Link = tuple[str, str]
Message = tuple[str, str, float]


def positive_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """max(0, a·b / (|a| |b|)), computed in float64; 0 when either vector is zero."""
    a64 = np.asarray(a, dtype=np.float64).ravel()
    b64 = np.asarray(b, dtype=np.float64).ravel()
    if a64.shape != b64.shape:
        raise ValueError(f"vectors differ in length: {a64.shape[0]} vs {b64.shape[0]}")
    na, nb = float(np.linalg.norm(a64)), float(np.linalg.norm(b64))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return max(0.0, float(a64 @ b64) / (na * nb))


class ContributionTracker:
    """Accumulated contributions c_ij of K clusters (module docstring)."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"need at least one cluster, got {k}")
        self.k = k
        self.c = np.zeros((k, k))
        self.periods = 0

    def record(self, averages: Sequence[np.ndarray]) -> None:
        """Add one exchange: c_ij += max(0, cos(ḡ_i, ḡ_j)) for every i ≠ j."""
        if len(averages) != self.k:
            raise ValueError(f"expected {self.k} cluster averages, got {len(averages)}")
        for i in range(self.k):
            for j in range(i + 1, self.k):
                s = positive_cosine(averages[i], averages[j])
                self.c[i, j] += s
                self.c[j, i] += s
        self.periods += 1

    def alpha(self, normalization: Normalization = "mean") -> np.ndarray:
        """α (K×K, zero diagonal) from the accumulated contributions."""
        c = self.c.copy()
        np.fill_diagonal(c, 0.0)
        if normalization == "mean":
            return c / self.periods if self.periods else c
        if normalization == "sum":
            tot = c.sum(axis=1, keepdims=True)
            return np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)
        raise ValueError(f"unknown normalization {normalization!r} (expected 'mean' or 'sum')")


def combine(own: np.ndarray, others: Sequence[np.ndarray], alphas: Sequence[float]) -> np.ndarray:
    """u = (g_own + Σ_j α_j g_j) / (1 + Σ_j α_j), float64 arithmetic, float32 result."""
    if len(others) != len(alphas):
        raise ValueError(f"{len(others)} other averages but {len(alphas)} weights")
    if any(a < 0 for a in alphas):
        raise ValueError("contribution weights must be >= 0")
    acc = np.asarray(own, dtype=np.float64).copy()
    for g, a in zip(others, alphas, strict=True):
        acc += float(a) * np.asarray(g, dtype=np.float64)
    return (acc / (1.0 + float(sum(alphas)))).astype(np.float32)


def combine_all(averages: Sequence[np.ndarray], alpha: np.ndarray) -> list[np.ndarray]:
    """The combined gradient u_i of every cluster i given the K×K matrix α."""
    k = len(averages)
    if alpha.shape != (k, k):
        raise ValueError(f"alpha must be {k}x{k}, got {alpha.shape}")
    return [
        combine(averages[i], [averages[j] for j in range(k) if j != i],
                [float(alpha[i, j]) for j in range(k) if j != i])
        for i in range(k)
    ]


def plain_average(averages: Sequence[np.ndarray]) -> np.ndarray:
    """(1/K) Σ_j ḡ_j: the baseline (every cluster average counts once)."""
    return mean_sync(averages)


class TemporaryPS:
    """State machine of one cluster's temporary PS (pure: a transport feeds it messages).

    Inputs, in order, for period p: ``add_gradient(p, b, worker, g)`` from every member for
    b = 0 … B−1, then ``add_peer_average(p, j, ḡ_j)`` from every other cluster's PS.

    * ``add_gradient`` returns the intra-cluster average ḡ to broadcast to the members when the
      last member's gradient of a batch b < B−1 arrives; after batch B−1 it returns ``None`` and
      :attr:`own_average` holds the average to send to the other PSs.  A duplicate (same worker,
      same batch) or a gradient of an earlier batch returns ``None`` and changes nothing (a
      retransmission); a non-member, or a batch/period the PS has not reached, is a
      ``ValueError`` (members wait for the update, so they cannot be ahead).
    * ``add_peer_average`` returns the update u to broadcast once all K averages of the period are
      in (rule below), and moves the PS to period p + 1; duplicates return ``None``.  Peer
      averages may arrive before the own average is complete, and a fast peer's average of
      period p + 1 before a slow peer's of period p: they are kept until their period.

    The contribution state (a :class:`ContributionTracker` per PS: every PS receives all K
    averages, so each keeps the whole matrix and they agree) survives re-election: the new PS
    starts from the old one's tracker (:meth:`handover`; on a network the old PS sends it, K²
    floats), so α still covers every period since the start.
    """

    def __init__(self, cluster: int, members: Sequence[int], n_clusters: int,
                 batches_per_period: int, rule: Literal["contribution", "average"] =
                 "contribution", normalization: Normalization = "mean",
                 include_current: bool = True, period: int = 0,
                 tracker: ContributionTracker | None = None) -> None:
        if not 0 <= cluster < n_clusters:
            raise ValueError(f"cluster {cluster} not in [0, {n_clusters})")
        if not members:
            raise ValueError(f"cluster {cluster} has no members")
        if batches_per_period < 1:
            raise ValueError(f"batches per period must be >= 1, got {batches_per_period}")
        if rule not in ("contribution", "average"):
            raise ValueError(f"unknown rule {rule!r} (expected 'contribution' or 'average')")
        if normalization not in ("mean", "sum"):
            raise ValueError(f"unknown normalization {normalization!r} (expected 'mean' or 'sum')")
        self.cluster = cluster
        self.members = tuple(sorted(members))
        self.k = n_clusters
        self.batches = batches_per_period
        self.rule = rule
        self.normalization = normalization
        self.include_current = include_current
        self.tracker = tracker if tracker is not None else ContributionTracker(n_clusters)
        if self.tracker.k != n_clusters:
            raise ValueError(f"tracker is for {self.tracker.k} clusters, not {n_clusters}")
        self.period = period
        self.batch = 0
        self.own_average: np.ndarray | None = None
        # The own average of the latest completed period, kept after the exchange finishes it
        # (own_average is cleared then): a transport sends it to the other PSs even when all
        # their averages were already in and the last gradient finished the period at once.
        self.completed_average: np.ndarray | None = None
        self.last_alpha: np.ndarray | None = None  # row α_c· used by the last exchange
        self._grads: dict[int, np.ndarray] = {}
        self._peers: dict[int, dict[int, np.ndarray]] = {}  # period -> cluster -> average

    def handover(self) -> TemporaryPS:
        """The state a newly elected PS of this cluster starts from (same period, tracker)."""
        if self.batch or self._grads or self.own_average is not None:
            raise ValueError("re-election is only allowed between periods")
        new = TemporaryPS(self.cluster, self.members, self.k, self.batches, self.rule, self.normalization,
                          self.include_current, self.period, self.tracker)
        new._peers = {p: dict(v) for p, v in self._peers.items()}  # early peer averages
        return new

    def add_gradient(self, period: int, batch: int, worker: int,
                     grad: np.ndarray) -> np.ndarray | None:
        if worker not in self.members:
            raise ValueError(f"worker {worker} is not a member of cluster {self.cluster}")
        if (period, batch) < (self.period, self.batch) or (
                self.own_average is not None and period == self.period):
            return None  # retransmission of a batch already averaged
        if (period, batch) != (self.period, self.batch):
            raise ValueError(f"cluster {self.cluster}: gradient for period {period} batch "
                             f"{batch}, expected period {self.period} batch {self.batch}")
        if worker in self._grads:
            return None
        self._grads[worker] = np.asarray(grad)
        if len(self._grads) < len(self.members):
            return None
        avg = mean_sync([self._grads[m] for m in self.members])
        self._grads = {}
        if self.batch < self.batches - 1:
            self.batch += 1
            return avg
        self.own_average = avg
        self.completed_average = avg
        return self._finish() if self._complete() else None

    def add_peer_average(self, period: int, cluster: int, avg: np.ndarray) -> np.ndarray | None:
        if not 0 <= cluster < self.k or cluster == self.cluster:
            raise ValueError(f"cluster {self.cluster}: bad peer cluster {cluster}")
        if period < self.period or cluster in self._peers.get(period, {}):
            return None  # late duplicate / retransmission
        if period > self.period + 1:
            raise ValueError(f"cluster {self.cluster}: peer average for period {period}, "
                             f"this PS is at period {self.period}")
        self._peers.setdefault(period, {})[cluster] = np.asarray(avg)
        return self._finish() if self._complete() else None

    def _complete(self) -> bool:
        return (self.own_average is not None
                and len(self._peers.get(self.period, {})) == self.k - 1)

    def _finish(self) -> np.ndarray:
        """All K averages of the period are in: the update u of this cluster (module docstring)."""
        assert self.own_average is not None
        peers = self._peers.pop(self.period, {})
        averages = [self.own_average if j == self.cluster else peers[j] for j in range(self.k)]
        if self.include_current:
            self.tracker.record(averages)
        if self.rule == "contribution":
            alpha = self.tracker.alpha(self.normalization)
            others = [j for j in range(self.k) if j != self.cluster]
            u = combine(averages[self.cluster], [averages[j] for j in others],
                        [float(alpha[self.cluster, j]) for j in others])
        else:
            alpha = np.ones((self.k, self.k)) - np.eye(self.k)
            u = plain_average(averages)
        if not self.include_current:
            self.tracker.record(averages)
        self.last_alpha = alpha[self.cluster].copy()
        self.own_average = None
        self.batch = 0
        self.period += 1
        return u


# --------------------------------------------------------------------------------------------
# message patterns and bytes per link
# --------------------------------------------------------------------------------------------


def cluster_period_messages(members: Sequence[Sequence[str]], ps: Sequence[str], batches: int,
                            grad_bytes: float) -> list[Message]:
    """Unicast messages of one exchange period of the cluster method (module docstring):
    per batch every non-PS member → its PS and PS → member; after the last batch every PS →
    every other PS.  (The PS's own gradient never leaves its host.)"""
    if len(members) != len(ps):
        raise ValueError(f"{len(members)} clusters but {len(ps)} temporary PSs")
    if batches < 1:
        raise ValueError(f"batches per period must be >= 1, got {batches}")
    msgs: list[Message] = []
    for hosts, s in zip(members, ps, strict=True):
        if s not in hosts:
            raise ValueError(f"temporary PS {s!r} is not a member of its cluster {list(hosts)}")
        for m in hosts:
            if m != s:
                msgs.append((m, s, batches * grad_bytes))
                msgs.append((s, m, batches * grad_bytes))
    for s in ps:
        for t in ps:
            if s != t:
                msgs.append((s, t, grad_bytes))
    return msgs


def central_period_messages(workers: Sequence[str], ps: str, batches: int,
                            grad_bytes: float) -> list[Message]:
    """The same period with one central PS ``ps``: per batch every worker → PS and PS → worker
    (``ps`` may be a separate host or one of the workers)."""
    if batches < 1:
        raise ValueError(f"batches per period must be >= 1, got {batches}")
    msgs: list[Message] = []
    for n in workers:
        if n != ps:
            msgs.append((n, ps, batches * grad_bytes))
            msgs.append((ps, n, batches * grad_bytes))
    return msgs


def link_bytes(graph: nx.Graph, messages: Sequence[Message]) -> dict[Link, float]:
    """Bytes on every directed link (u, v) when ``messages`` follow the installed host routes
    (:func:`topo.paths.route_path`)."""
    pairs: dict[tuple[str, str], float] = {}
    for src, dst, nbytes in messages:
        if nbytes < 0:
            raise ValueError(f"message {src}->{dst} has negative size {nbytes}")
        for end in (src, dst):
            if end not in graph:
                raise ValueError(f"host {end!r} is not in the topology")
        if src != dst:
            pairs[(src, dst)] = pairs.get((src, dst), 0.0) + nbytes
    loads: dict[Link, float] = {}
    for (src, dst), nbytes in pairs.items():
        path = route_path(graph, src, dst)
        for link in zip(path[:-1], path[1:], strict=True):
            loads[link] = loads.get(link, 0.0) + nbytes
    return loads


def busiest_link(loads: Mapping[Link, float]) -> tuple[Link, float]:
    """The most loaded directed link (ties: first in name order) and its bytes."""
    if not loads:
        raise ValueError("no link carries any bytes")
    link = min(loads, key=lambda lk: (-loads[lk], natural_key(lk[0]), natural_key(lk[1])))
    return link, loads[link]


# --------------------------------------------------------------------------------------------
# in-process simulation
# --------------------------------------------------------------------------------------------


@dataclass
class SimResult:
    """Outcome of :func:`simulate` (per period unless noted)."""

    method: str
    accuracy: list[float]  # worker-weighted mean test accuracy after each period
    cluster_accuracy: list[list[float]]  # per cluster (one entry for "central")
    ps: list[tuple[int, ...]]  # temporary PS (worker index) of every cluster, per period
    alpha: list[np.ndarray] = field(default_factory=list)  # α used at each exchange
    params: list[np.ndarray] = field(default_factory=list)  # final parameters of every worker
    link_bytes: dict[Link, float] = field(default_factory=dict)  # whole run
    busiest_link: Link | None = None
    busiest_link_bytes_per_period: float = 0.0

    @property
    def final_accuracy(self) -> float:
        return self.accuracy[-1]


def _members(labels: Sequence[int]) -> list[list[int]]:
    k = max(labels) + 1
    out: list[list[int]] = [[] for _ in range(k)]
    for worker, c in enumerate(labels):
        out[c].append(worker)
    if any(not m for m in out):
        raise ValueError(f"cluster labels must be 0..k-1 with no empty cluster, got {labels}")
    return out


def simulate(
    cfg: TrainConfig,
    labels: Sequence[int],
    method: Method,
    periods: int,
    batches_per_period: int,
    reelect_every: int = 1,
    seed: int = 0,
    normalization: Normalization = "mean",
    include_current: bool = True,
    data: Dataset | None = None,
    graph: nx.Graph | None = None,
    hosts: Sequence[str] | None = None,
    central_ps: str | None = None,
) -> SimResult:
    """Train ``cfg.n_workers`` workers for ``periods`` × ``batches_per_period`` batches.

    ``labels[i]`` is worker i's cluster (ignored by ``"central"``).  ``seed`` drives the PS
    elections (the model/data seeds are ``cfg.seed``).  With ``graph`` and ``hosts`` (worker i
    runs on ``hosts[i]``) the run's message pattern is accounted per link; ``"central"`` then
    needs ``central_ps`` (a host of the graph).
    """
    if len(labels) != cfg.n_workers:
        raise ValueError(f"{len(labels)} labels for {cfg.n_workers} workers")
    if periods < 1 or batches_per_period < 1:
        raise ValueError("periods and batches per period must be >= 1")
    if method not in ("contribution", "average", "central"):
        raise ValueError(f"unknown method {method!r}")
    if hosts is not None and len(hosts) != cfg.n_workers:
        raise ValueError(f"{len(hosts)} hosts for {cfg.n_workers} workers")
    if (graph is None) != (hosts is None):
        raise ValueError("bytes accounting needs both graph and hosts")
    data = data if data is not None else load_data(cfg)
    B = batches_per_period
    if method == "central":
        return _simulate_central(cfg, periods, B, data, graph, hosts, central_ps)

    members = _members(labels)
    k = len(members)
    schedule = ps_schedule(members, periods, reelect_every, seed)
    reps = [Replica(cfg, w, data) for w in range(cfg.n_workers)]
    rule: Literal["contribution", "average"] = method  # type: ignore[assignment]
    pss = [TemporaryPS(c, mem, k, B, rule, normalization, include_current)
           for c, mem in enumerate(members)]
    res = SimResult(method, [], [], schedule)
    msgs: list[Message] = []
    grad_bytes = 4.0 * reps[0].model.n_params

    def broadcast(c: int, update: np.ndarray) -> None:
        for m in members[c]:
            reps[m].apply(update)

    for p in range(periods):
        if p and schedule[p] != schedule[p - 1]:
            pss = [ps.handover() for ps in pss]  # re-election: the new PS takes the state over
        for b in range(B):
            r = p * B + b
            for c, mem in enumerate(members):
                grads = [(m, reps[m].gradient(r)[1]) for m in mem]  # all at the same params
                for m, g in grads:
                    out = pss[c].add_gradient(p, b, m, g)
                    if out is not None:
                        broadcast(c, out)
        # exchange (a lone cluster already finished the period with its last gradient)
        own = [ps.own_average for ps in pss]
        for c, ps in enumerate(pss):
            if k == 1:
                break
            update = None
            for j in range(k):
                if j != c:
                    update = ps.add_peer_average(p, j, own[j])  # type: ignore[arg-type]
            assert update is not None
            broadcast(c, update)
        res.alpha.append(np.stack([ps.last_alpha for ps in pss]))
        accs = [reps[schedule[p][c]].test_accuracy() for c in range(k)]
        res.cluster_accuracy.append(accs)
        res.accuracy.append(sum(a * len(m) for a, m in zip(accs, members, strict=True))
                            / cfg.n_workers)
        if graph is not None and hosts is not None:
            msgs += cluster_period_messages(
                [[hosts[m] for m in mem] for mem in members],
                [hosts[s] for s in schedule[p]], B, grad_bytes)
    res.params = [r.params.copy() for r in reps]
    if graph is not None and hosts is not None:
        _account(res, graph, msgs, periods)
    return res


def _account(res: SimResult, graph: nx.Graph, msgs: list[Message], periods: int) -> None:
    res.link_bytes = link_bytes(graph, msgs)
    res.busiest_link, total = busiest_link(res.link_bytes)
    res.busiest_link_bytes_per_period = total / periods


def _simulate_central(cfg: TrainConfig, periods: int, B: int, data: Dataset,
                      graph: nx.Graph | None, hosts: Sequence[str] | None,
                      central_ps: str | None) -> SimResult:
    run = train_synchronous(replace(cfg, rounds=periods * B), data=data)
    acc = [run.accuracy[(p + 1) * B - 1] for p in range(periods)]
    res = SimResult("central", acc, [[a] for a in acc], [], params=[run.params] * cfg.n_workers)
    if graph is not None and hosts is not None:
        if central_ps is None:
            raise ValueError("the central-PS method needs central_ps to account bytes")
        grad_bytes = 4.0 * run.params.shape[0]
        msgs = central_period_messages(hosts, central_ps, B, grad_bytes) * periods
        _account(res, graph, msgs, periods)
    return res
