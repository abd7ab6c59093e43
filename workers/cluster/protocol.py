"""The clustered temporary-PS protocol as message-driven state machines (docs/design.md §7), no I/O.

Three roles, each ``handle(message) -> [Out]`` (an :class:`Out` is a destination endpoint, a
message and a delay before it may leave); :mod:`workers.cluster.node` carries them over TCP
between Mininet hosts, :func:`run_in_process` carries them through in-memory channels.

Endpoints: workers ``0 … N−1`` (profile order) and endpoint ``N``, which is the coordinator for
the ``contribution`` and ``average`` rules and the single central PS for ``central``.

Coordinator  [decision: a coordinator process on its own host, in band; not the controller]
    Every worker sends its features of period p (:class:`Features`) at the start of the period.
    At the first period of each election epoch (p % R == 0) the coordinator waits for all N
    feature vectors, normalizes over the whole history
    (:func:`workers.cluster.features.node_vectors`), clusters
    (:func:`workers.cluster.clustering.cluster_workers`: k given or by silhouette, seeded) and
    elects a temporary PS per cluster (:func:`workers.cluster.clustering.elect`: seeded, never the
    previous PS again when the partition is unchanged) and answers every worker with
    :class:`Assign`; inside an epoch it answers each worker at once with the epoch's assignment (the
    clustering holds for the epoch, so a worker need not wait for the others) and only records the
    features.  The runner puts it on the ``--ps`` host (the host the central-PS baseline uses), in
    band: its messages cross the same emulated links as the gradients and are measured with them, as
    on a real cluster without an out-of-band control network.  The testbed's controller lives in the
    root namespace, outside the emulated network, so using it would hide that traffic; and a
    coordinator elected among the workers would need an election before the first clustering
    (chicken and egg) for a job of a few hundred bytes per period.  Re-clustering only at epoch
    starts keeps every PS in place for R periods as docs/design.md §7's "re-elect after a preset
    number of periods" requires.  If a new clustering changes the partition, the contribution
    history of the old clusters no longer describes the new ones: ``reset`` tells the new PSs to
    start from zero, and since the members of a re-formed cluster come from clusters whose models
    drifted apart, each new PS first sends its model (parameters and momentum, :class:`Params`) to
    its members, who adopt it before their first batch, so that a cluster's members are identical
    again; otherwise the old PS hands its ContributionTracker to the new PS (:class:`Handover`, K²
    floats).

Worker (member and, when elected, temporary PS)
    Period p: send Features → get Assign → for batch b = 0 … B−1: compute the gradient of global
    round p·B + b at its parameters (:class:`workers.common.model.Replica`, the batches of the
    central-PS reference), send it to its PS (a message to itself when it is the PS) after its
    compute time, wait for the PS's :class:`Update`, apply it.  As PS it feeds a
    :class:`workers.cluster.sync.TemporaryPS`: per-batch averages go back as Updates; after the
    last batch its cluster average goes to every other PS (:class:`PeerAvg`) and, once all K
    are in, the combined gradient (contribution rule or plain average) goes to its members.
    Messages for the PS role of a period whose assignment the worker has not yet received (a
    fast member's gradient, a fast peer's average, the handover) are kept until it has.

Central PS (rule ``central``)
    Endpoint N averages all N gradients of every batch (a TemporaryPS with one cluster of all
    workers, of which it is not a member) and sends the average to every worker: the synchronous
    reference (:func:`workers.common.model.train_synchronous`), bit for bit.

Compute time  [decision: sleeps scaled by the worker's CPU share, not cgroup limits]
    A batch of the digits model computes in well under a millisecond, so the hosts'
    heterogeneity must be emulated: worker i's batch in period p takes ``step_s / cpu_share_i(p)``
    seconds (``step_s`` = the nominal compute time with the whole machine; the gradient is
    computed at once and its message leaves after that delay).  Mininet's CPULimitedHost works
    on this machine (cgroup v1 cpu controller; measured: a fixed busy loop took 1.77 s at
    cpu=0.1 and 0.29 s at cpu=0.4, a 6.2x ratio for a 4x share ratio), but it was not used:
    (1) the real work per batch is ~0.2 ms, far below the quota's 100 ms enforcement period, so
    a quota would not slow a batch by its share but stall it by up to ~80 ms at random; (2) the
    processes' start-up (numpy, scikit-learn imports, ~1 s of CPU) would take 10–20 s at a 5 %
    share; (3) the shares are of 2 cores that the pyswitch switches and other users' jobs
    also need, so the achieved slow-down would vary from run to run.  A sleep gives each worker
    exactly the profile's relative speed, reproducibly, without loading the CPUs the switches
    need.

Determinism
    Every average is taken in member order (:func:`workers.common.model.mean_sync`) and every
    combination in cluster order, whatever order messages arrive in, so a run's parameters equal
    :func:`workers.cluster.sync.simulate`'s for the same labels, seed and election schedule, bit
    for bit (tests/test_cluster_protocol.py shuffles delivery to show it; the Mininet test
    checks it on the real network).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from workers.cluster.clustering import cluster_workers, elect, epoch_of
from workers.cluster.features import FeatureHistory, NodeProfile, load_profile, node_vectors
from workers.cluster.job import ClusterJob
from workers.cluster.sync import ContributionTracker, TemporaryPS
from workers.cluster.wire import (
    Assign,
    ClusterMessage,
    Features,
    Grad,
    Handover,
    Params,
    PeerAvg,
    Update,
    decode,
    encode,
)
from workers.common.model import Replica, load_data

__all__ = [
    "RULES",
    "CentralPs",
    "ClusterWorker",
    "Coordinator",
    "Out",
    "worker_features",
    "parse_tc_rate",
    "uplink_change",
    "run_in_process",
    "step_seconds",
]

RULES: tuple[str, ...] = ("contribution", "average", "central")


@dataclass(frozen=True)
class Out:
    """Send ``msg`` to endpoint ``dest`` ``delay`` seconds after the triggering message."""

    dest: int
    msg: ClusterMessage
    delay: float = 0.0


# ------------------------------------------------------------------ features


_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMG]?)bit\b")
_UNIT = {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3}


def parse_tc_rate(text: str) -> float | None:
    """Mbit/s of the first htb class in ``tc class show`` output (None: no shaped class)."""
    m = _RATE.search(text)
    return None if m is None else float(m.group(1)) * _UNIT[m.group(2)]


def uplink_change(profile: NodeProfile, worker: str, period: int) -> float | None:
    """Mbit/s to give ``worker``'s access link (both ends: the worker re-rates its egress, the
    runner the switch's) when ``period`` starts, None to leave it: a constant
    ``uplink_bw`` is the rate the link was built with; a pattern is set in period 0 (an
    earlier run on the same network may have left the link at another of its values) and
    whenever its value changes."""
    if "uplink_bw" not in profile.features or period < 0:
        return None
    pattern = profile.values[worker]["uplink_bw"]
    if len(set(pattern)) == 1:
        return None
    now, before = pattern[period % len(pattern)], pattern[(period - 1) % len(pattern)]
    return now if period == 0 or now != before else None


def worker_features(profile: NodeProfile, worker: str, period: int,
                    measured: dict[str, float] | None = None) -> np.ndarray:
    """The feature vector of ``worker`` in ``period`` (profile order): the profile's values,
    replaced by ``measured`` ones where the worker measured them (e.g. its link's rate)."""
    row = profile.sample(period)[profile.nodes.index(worker)]
    for feat, v in (measured or {}).items():
        if feat in profile.features:
            row[profile.features.index(feat)] = v
    return row


def step_seconds(profile: NodeProfile, worker: str, period: int, step_s: float) -> float:
    """Compute time of one batch: ``step_s / cpu_share`` (module docstring)."""
    if "cpu_share" not in profile.features:
        return step_s
    pattern = profile.values[worker]["cpu_share"]
    return step_s / pattern[period % len(pattern)]


# ------------------------------------------------------------------ coordinator


class Coordinator:
    """Collects features, clusters and elects at epoch starts (module docstring)."""

    def __init__(self, job: ClusterJob, profile: NodeProfile) -> None:
        if list(profile.nodes) != list(job.workers):
            raise ValueError(f"job workers {job.workers} differ from the profile's {profile.nodes}")
        self.job = job
        self.profile = profile
        self.history = FeatureHistory(profile.nodes, profile.features, job.history_window)
        self.weights = profile.weight_vector()
        self._pending: dict[int, dict[int, np.ndarray]] = {}
        self._recorded = 0  # periods recorded into the history
        self.current: Assign | None = None
        self.epochs: list[dict[str, Any]] = []
        self.features: list[list[list[float]]] = []  # [period][worker] as recorded
        self._answered_last = 0

    @property
    def done(self) -> bool:
        return self._answered_last == self.job.n

    def handle(self, msg: ClusterMessage) -> list[Out]:
        if not isinstance(msg, Features):
            raise ValueError(f"the coordinator does not accept {type(msg).__name__}")
        n, P = self.job.n, self.job.periods
        if not 0 <= msg.worker < n or not 0 <= msg.period < P:
            raise ValueError(f"features from worker {msg.worker} for period {msg.period}: "
                             "out of range")
        if len(msg.values) != len(self.profile.features):
            raise ValueError(f"worker {msg.worker}: {len(msg.values)} features, expected "
                             f"{len(self.profile.features)}")
        got = self._pending.setdefault(msg.period, {})
        if msg.worker in got:
            raise ValueError(f"worker {msg.worker} sent features of period {msg.period} twice")
        got[msg.worker] = np.asarray(msg.values, dtype=np.float64)
        while len(self._pending.get(self._recorded, {})) == n:
            rows = self._pending.pop(self._recorded)
            matrix = np.stack([rows[i] for i in range(n)])
            self.history.record(matrix)
            self.features.append(matrix.tolist())
            self._recorded += 1
        out: list[Out] = []
        if msg.period % self.job.reelect == 0:
            if self._recorded > msg.period:  # everybody's features of the epoch start are in
                self._elect(msg.period)
                out = [Out(i, self.current) for i in range(n)]  # type: ignore[arg-type]
        else:
            assert self.current is not None
            c = self.current
            out = [Out(msg.worker, Assign(msg.period, c.epoch, c.labels, c.ps,
                                          silhouette=c.silhouette))]
        if msg.period == P - 1:
            self._answered_last += len(out)
        return out

    def _elect(self, period: int) -> None:
        # The history holds exactly the periods 0..period here (workers send in period order
        # and cannot start period+1 before this answer), so the latest one is ``period``.
        vectors = self._vectors()
        cl = cluster_workers(vectors, self.job.k, self.job.k_range, self.job.seed)
        epoch = epoch_of(period, self.job.reelect)
        prev = self.current
        same = prev is not None and prev.labels == cl.labels
        ps = tuple(elect(m, self.job.seed, epoch, c, prev.ps[c] if same else None)  # type: ignore[union-attr]
                   for c, m in enumerate(cl.members))
        self.current = Assign(period, epoch, cl.labels, ps, new_epoch=True,
                              reset=prev is not None and not same, silhouette=cl.silhouette)
        self.epochs.append({"period": period, "epoch": epoch, "labels": list(cl.labels),
                            "ps": list(ps), "k": cl.k, "silhouette": cl.silhouette,
                            "reset": self.current.reset, "vectors": vectors.tolist()})

    def _vectors(self) -> np.ndarray:
        return node_vectors(self.history, self.weights)

    def report(self) -> dict[str, Any]:
        return {"role": "coordinator", "features": list(self.profile.features),
                "history": self.features, "epochs": self.epochs}


# ------------------------------------------------------------------ worker


class ClusterWorker:
    """One worker: member of a cluster, temporary PS when elected (module docstring).

    ``features(p)`` gives its feature vector of period p; ``step(p)`` its compute time per batch;
    ``clock()`` wall time for the logs (all Mininet hosts share the kernel's clock);
    ``enter_period(p)`` runs first thing in every period, whatever the rule (the shell
    re-shapes the worker's uplink there when its profile changes it).
    """

    def __init__(self, job: ClusterJob, me: int, replica: Replica,
                 features: Callable[[int], np.ndarray], step: Callable[[int], float],
                 clock: Callable[[], float] = time.time,
                 enter_period: Callable[[int], None] | None = None) -> None:
        if job.rule not in RULES:
            raise ValueError(f"unknown rule {job.rule!r} (expected {', '.join(RULES)})")
        self.job = job
        self.me = me
        self.replica = replica
        self.features = features
        self.step = step
        self.clock = clock
        self.enter_period = enter_period
        self.hub = job.n  # coordinator or central PS
        self.period = 0
        self.batch = 0
        self.assign: Assign | None = None
        self.tps: TemporaryPS | None = None
        self._ps_pending: list[ClusterMessage] = []
        self._handovers: dict[int, Handover] = {}
        self._models: dict[int, Params] = {}
        self._sent_average: tuple[int, int] | None = None  # (period, cluster) last PeerAvg sent
        self.done = False
        self.periods_log: list[dict[str, Any]] = []
        self.rounds_log: list[dict[str, Any]] = []
        self.ps_log: list[dict[str, Any]] = []
        self._loss = 0.0
        self._period_features: list[float] = []

    # -- member side

    def start(self) -> list[Out]:
        return self._begin_period(0)

    def _begin_period(self, p: int) -> list[Out]:
        self.period, self.batch = p, 0
        if self.enter_period is not None:
            self.enter_period(p)
        if self.job.rule == "central":
            self.assign = Assign(p, 0, (0,) * self.job.n, (self.hub,))
            return self._begin_batch()
        vec = np.asarray(self.features(p), dtype=np.float64)
        self._period_features = vec.tolist()
        return [Out(self.hub, Features(self.me, p, vec))]

    def _begin_batch(self) -> list[Out]:
        assert self.assign is not None
        r = self.period * self.job.batches + self.batch
        self._loss, g = self.replica.gradient(r)
        ps = self.assign.ps[self.assign.labels[self.me]]
        return [Out(ps, Grad(self.period, self.batch, self.me, g.copy()),
                    self.step(self.period))]

    def _on_update(self, msg: Update) -> list[Out]:
        if (msg.period, msg.batch) != (self.period, self.batch):
            raise ValueError(f"worker {self.me}: update for period {msg.period} batch {msg.batch}, "
                             f"expected period {self.period} batch {self.batch}")
        self.replica.apply(msg.grad)
        now = self.clock()
        self.rounds_log.append({"round": self.period * self.job.batches + self.batch,
                                "time": now, "loss": self._loss})
        if self.batch < self.job.batches - 1:
            self.batch += 1
            return self._begin_batch()
        a = self.assign
        assert a is not None
        c = a.labels[self.me]
        self.periods_log.append({
            "period": self.period, "epoch": a.epoch, "time": now,
            "accuracy": self.replica.test_accuracy(), "cluster": c,
            "ps": a.ps[c] if self.job.rule != "central" else None,
            "labels": list(a.labels), "all_ps": list(a.ps), "new_epoch": a.new_epoch,
            "reset": a.reset, "features": self._period_features})
        if self.period + 1 == self.job.periods:
            self.done = True
            return []
        return self._begin_period(self.period + 1)

    def _on_assign(self, msg: Assign) -> list[Out]:
        if msg.period != self.period or self.job.rule == "central":
            raise ValueError(f"worker {self.me}: unexpected assignment for period {msg.period}")
        if len(msg.labels) != self.job.n:
            raise ValueError(f"worker {self.me}: assignment has {len(msg.labels)} labels")
        prev, self.assign = self.assign, msg
        out: list[Out] = []
        if self.tps is not None and prev is not None:
            old_c = prev.labels[self.me]
            if msg.reset or msg.ps[old_c] != self.me:
                if not msg.reset:
                    t = self.tps.tracker
                    out.append(Out(msg.ps[old_c], Handover(msg.period, old_c, t.periods,
                                                           t.c.copy())))
                self.tps = None
        out += self._ensure_ps()
        if not msg.reset:
            return out + self._begin_batch()
        c = msg.labels[self.me]
        if msg.ps[c] == self.me:  # re-formed cluster: the members adopt the PS's model
            vel = self.replica.opt.velocity
            vel = np.zeros_like(self.replica.params) if vel is None else vel
            out += [Out(m, Params(msg.period, self.replica.params.copy(), vel.copy()))
                    for m, lab in enumerate(msg.labels) if lab == c and m != self.me]
            return out + self._begin_batch()
        return out + self._adopt()

    def _adopt(self) -> list[Out]:
        """After a reset: take the new PS's model once both it and the assignment are in."""
        a = self.assign
        if a is None or not a.reset or a.period != self.period or self.batch != 0:
            return []
        msg = self._models.pop(self.period, None)
        if msg is None:
            return []
        self.replica.params[...] = msg.params
        self.replica.opt.velocity = np.array(msg.velocity, dtype=self.replica.params.dtype)
        return self._begin_batch()

    # -- PS side

    def _ensure_ps(self) -> list[Out]:
        """Create this period's TemporaryPS if this worker is the PS and it can (module docs)."""
        a = self.assign
        if self.tps is not None or a is None or a.period != self.period:
            return []
        c = a.labels[self.me]
        if a.ps[c] != self.me:
            return []
        members = [i for i, lab in enumerate(a.labels) if lab == c]
        k = len(a.ps)
        tracker = None
        if self.period > 0 and not a.reset:
            h = self._handovers.pop(self.period, None)
            if h is None:
                return []  # wait for the previous PS's contributions
            if h.cluster != c or h.contributions.shape != (k, k):
                raise ValueError(f"worker {self.me}: handover for cluster {h.cluster} with "
                                 f"{h.contributions.shape} contributions, expected cluster {c}")
            tracker = ContributionTracker(k)
            tracker.c = np.array(h.contributions, dtype=np.float64)
            tracker.periods = h.periods
        rule: Literal["contribution", "average"] = self.job.rule  # type: ignore[assignment]
        self.tps = TemporaryPS(c, members, k, self.job.batches, rule,
                               self.job.normalization,  # type: ignore[arg-type]
                               self.job.include_current, self.period, tracker)
        return self._drain_ps()

    def _drain_ps(self) -> list[Out]:
        out: list[Out] = []
        progress = True
        while progress and self.tps is not None:
            progress = False
            for msg in list(self._ps_pending):
                tps = self.tps
                # Only messages of a period whose assignment this worker knows: until then it
                # cannot tell whether it is still the PS, or of which members (a re-clustering
                # may reset its cluster), e.g. a fast member's first gradient of the next period.
                assert self.assign is not None
                if msg.period > min(tps.period, self.assign.period):  # type: ignore[union-attr]
                    continue
                self._ps_pending.remove(msg)
                progress = True
                out += self._feed(msg)
                if self.tps is not tps:
                    break
        return out

    def _feed(self, msg: ClusterMessage) -> list[Out]:
        tps = self.tps
        a = self.assign
        assert tps is not None and a is not None
        p, c = tps.period, tps.cluster
        if isinstance(msg, Grad):
            res = tps.add_gradient(msg.period, msg.batch, msg.worker, msg.grad)
            batch = msg.batch
        else:
            assert isinstance(msg, PeerAvg)
            res = tps.add_peer_average(msg.period, msg.cluster, msg.avg)
            batch = self.job.batches - 1
        out: list[Out] = []
        own_done = (isinstance(msg, Grad) and msg.period == p and msg.batch == batch
                    and batch == self.job.batches - 1
                    and (tps.own_average is not None or tps.period == p + 1))
        if own_done and tps.k > 1 and self._sent_average != (p, c):
            # The cluster's average of period p is complete: to every other PS.
            self._sent_average = (p, c)
            out += [Out(a.ps[j], PeerAvg(p, c, tps.completed_average))
                    for j in range(tps.k) if j != c]
        if res is not None:
            if tps.period != p:  # the exchange finished period p
                self.ps_log.append({"period": p, "cluster": c, "members": list(tps.members),
                                    "alpha": tps.last_alpha.tolist()
                                    if tps.last_alpha is not None else None,
                                    "contributions": tps.tracker.c[c].tolist()})
            out += [Out(m, Update(p, batch, res)) for m in tps.members]
        return out

    # -- dispatch

    def handle(self, msg: ClusterMessage) -> list[Out]:
        if isinstance(msg, Update):
            return self._on_update(msg)
        if isinstance(msg, Assign):
            return self._on_assign(msg)
        if isinstance(msg, Handover):
            if msg.period in self._handovers:
                raise ValueError(f"worker {self.me}: two handovers for period {msg.period}")
            self._handovers[msg.period] = msg
            return self._ensure_ps()
        if isinstance(msg, Params):
            self._models[msg.period] = msg
            return self._adopt()
        if isinstance(msg, Grad | PeerAvg):
            self._ps_pending.append(msg)
            return self._drain_ps()
        raise ValueError(f"worker {self.me} does not accept {type(msg).__name__}")

    def report(self) -> dict[str, Any]:
        return {"role": "node", "node": self.me, "host": self.job.workers[self.me],
                "periods": self.periods_log, "rounds": self.rounds_log, "ps_log": self.ps_log}


# ------------------------------------------------------------------ central PS


class CentralPs:
    """Endpoint N of the ``central`` rule: one PS averaging all N gradients per batch."""

    def __init__(self, job: ClusterJob) -> None:
        self.job = job
        self.tps = TemporaryPS(0, list(range(job.n)), 1, job.batches, "average")
        self.done = False

    def handle(self, msg: ClusterMessage) -> list[Out]:
        if not isinstance(msg, Grad):
            raise ValueError(f"the central PS does not accept {type(msg).__name__}")
        p = self.tps.period
        res = self.tps.add_gradient(msg.period, msg.batch, msg.worker, msg.grad)
        if res is None:
            return []
        if self.tps.period == self.job.periods:
            self.done = True
        return [Out(i, Update(p, msg.batch, res)) for i in range(self.job.n)]

    def report(self) -> dict[str, Any]:
        return {"role": "central", "periods": self.tps.period}


# ------------------------------------------------------------------ in-process driver


def run_in_process(job: ClusterJob, profile: NodeProfile | None = None,
                   shuffle_seed: int | None = None, max_steps: int = 10_000_000
                   ) -> tuple[list[ClusterWorker], Coordinator | CentralPs]:
    """Run the protocol with in-memory channels (every message encoded and decoded).

    Each (source, destination) channel is FIFO like a TCP connection; with ``shuffle_seed``
    the next channel to deliver from is drawn at random, so messages of different channels
    arrive in arbitrary order.  Delays are ignored (they only shift wall time)."""
    profile = profile if profile is not None else load_profile(job.profile)
    data = load_data(job.train)
    workers = [ClusterWorker(job, i, Replica(job.train, i, data),
                             lambda p, h=h: worker_features(profile, h, p),
                             lambda p, h=h: step_seconds(profile, h, p, job.step_s),
                             clock=lambda: 0.0)
               for i, h in enumerate(job.workers)]
    hub: Coordinator | CentralPs = (CentralPs(job) if job.rule == "central"
                                    else Coordinator(job, profile))
    endpoints: Sequence[Any] = [*workers, hub]
    channels: dict[tuple[int, int], deque[bytes]] = {}
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None

    def post(src: int, outs: list[Out]) -> None:
        for o in outs:
            channels.setdefault((src, o.dest), deque()).append(encode(o.msg))

    for i, nd in enumerate(workers):
        post(i, nd.start())
    for _ in range(max_steps):
        busy = [key for key, q in channels.items() if q]
        if not busy:
            break
        key = busy[int(rng.integers(len(busy)))] if rng is not None else busy[0]
        msg = decode(channels[key].popleft())
        post(key[1], endpoints[key[1]].handle(msg))
    else:  # pragma: no cover - a protocol bug
        raise RuntimeError("the in-process run did not finish")
    stuck = [i for i, nd in enumerate(workers) if not nd.done]
    if stuck or not hub.done:
        raise RuntimeError(f"deadlock: workers {stuck} not done (hub done: {hub.done})")
    return workers, hub
