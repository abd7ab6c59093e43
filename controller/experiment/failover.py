"""The controller's switch-failure monitor for the INA experiment (docs/design.md §9): the I/O
shell around :mod:`controller.plan.replan`.

While a job runs, :meth:`SwitchMonitor.poll` (called by the runner's wait loop, every ~50 ms)
checks every switch's process.  When one has died it

1. re-plans on the surviving network (:func:`controller.plan.replan.replan_without`; hosts cut off
   from the PS end the run with one error line),
2. writes the difference between the old and the new rules to every surviving switch over
   P4Runtime (:func:`controller.dataplane.deploy.update`; no pipeline push, so the aggregator slots of
   chunks in flight survive): routes avoid the dead switch, and its agg_id is routed to the
   PS, so packets still addressed to it are merged there,
3. asks each running job's PS for the new chunk schedules from two rounds after the newest
   round a worker reported (:func:`workers.ina.control_io.send_request`).  The PS, the one
   writer of the job's control record, takes them from that round or, if it has already
   completed the round before it, from the first round no worker has started, so no worker
   mixes schedules within a round; its ``control`` event gives the round it chose.

Packets in flight through the dead switch, or through a switch between two of its writes, are
lost; the workers' retransmissions recover them (docs/protocol.md §6).

The monitor watches the switch processes because that is what the testbed owns; a controller
of real switches would watch its P4Runtime stream channels the same way.  ``fail`` =
``(switch, round)`` kills that switch once a worker reported ``round`` (fault injection for
experiments and tests).

What the workers and the PS print is read as events (:mod:`workers.ina.events`): the
workers' ``round`` events drive fault injection, the PS's ``control`` and ``silent`` events the
worker-failure handling; no human line is parsed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import networkx as nx

from controller.dataplane.deploy import DeployError, SwitchJob, SwitchRules, switch_rules, update
from controller.errors import ExperimentError
from controller.plan.hierarchy import aggregation_tree, tree_gamma, without_switch
from controller.plan.lp import PlanError
from controller.plan.replan import replan_without
from controller.plan.types import Plan
from workers.ina.control_io import request_path, send_request
from workers.ina.events import ControlEvent, Event, RoundEvent, SilentEvent
from workers.ina.tree import Tree

SCHEDULE_DELAY_ROUNDS = 2  # new schedules asked from this many rounds after the newest reported


def _round_text(text: str) -> bool:
    """Whether ``text`` is a round number as the options take it: ASCII digits, at most 9
    (``isdigit`` alone takes ``²`` and numbers past Python's int-string limit)."""
    t = text.strip()
    return t.isascii() and t.isdigit() and len(t) <= 9


def parse_fail_switch(text: str, graph: nx.Graph, rounds: int) -> tuple[str, int]:
    """``NAME@ROUND`` → (switch, round), or one ExperimentError naming the option."""
    name, sep, rnd = text.partition("@")
    if not sep or not _round_text(rnd):
        raise ExperimentError(f"--fail-switch: expected SWITCH@ROUND, got {text[:60]!r}")
    name, r = name.strip(), int(rnd)
    if name not in graph or graph.nodes[name].get("kind") != "switch":
        raise ExperimentError(f"--fail-switch: {name!r} is not a switch of the topology")
    if rounds < 2:
        raise ExperimentError("--fail-switch needs --rounds >= 2 (a round before the failure "
                              "and one after it)")
    if not 0 <= r < rounds - 1:
        raise ExperimentError(f"--fail-switch: round {r} must be in 0..{rounds - 2} "
                              f"(the switch dies after that round; --rounds {rounds})")
    return name, r


Replan = Callable[[nx.Graph, Plan, str, list[SwitchJob]], tuple[nx.Graph, Plan, list[SwitchJob]]]


def _replan_one_job(graph: nx.Graph, plan: Plan, dead: str,
                    jobs: list[SwitchJob]) -> tuple[nx.Graph, dict, list[SwitchJob]]:
    g, new = replan_without(graph, plan, dead)
    return g, new, jobs


def plan_gamma(plan: Plan) -> float:
    """A plan's γ: one job's, or for several jobs the smallest γ_j / w_j."""
    return plan.gamma


@dataclass
class FailoverEvent:
    switch: str
    after_round: int  # newest round a worker had reported when the death was noticed
    detected_s: float | None  # from the kill (injected failures) to the notice; else None
    replan_s: float
    redeploy_s: float  # writing the rule differences to every surviving switch
    writes: int
    gamma_before: float
    gamma_after: float
    deployed_after: list[str]
    # the round the new schedules took effect from: the one asked for, or the later one a
    # job's PS chose (the latest of them with several jobs)
    schedules_from_round: int


def update_rules(network: Any, old: Mapping[str, SwitchRules], new: Mapping[str, SwitchRules],
                 p4info: Path) -> dict[str, int]:
    """Bring the switches of ``network`` from ``old`` to ``new`` (the differences only):
    over P4Runtime on Mininet, by the network's own ``update_rules`` where it has one (the
    simulated network's in-process switches).  Returns writes per switch."""
    own = getattr(network, "update_rules", None)
    if own is not None:
        return own(old, new)
    addresses = {s: (network.grpc_address(s), network.device_id(s)) for s in new}
    return update(old, new, addresses, p4info)


def ask_ps(network: Any, control_file: Path, request: dict) -> bool:
    """Send a job's PS a control request: on the FIFO beside its record, or through the
    network's own ``ask_ps`` where it has one (the simulated network's hosts).  False when
    no PS takes it."""
    own = getattr(network, "ask_ps", None)
    if own is not None:
        return bool(own(control_file, request))
    return send_request(request_path(control_file), request)


class SwitchMonitor:
    """Watches the switches of a running INA network and fails over (module docstring).

    ``graph``/``plan`` are the current ones (replaced on every failover, so later modes of
    the run start on the degraded network); ``schedules(plan)`` gives the workers' schedules
    of a plan, keyed by worker id."""

    def __init__(self, mininet: Any, graph: nx.Graph, plan: Plan,
                 rules: Mapping[str, SwitchRules], jobs: Iterable[SwitchJob],
                 host_addrs: Mapping[str, tuple[str, str]], p4info: Path,
                 say: Callable[[str], None], fail: tuple[str, int] | None = None,
                 slot_policy: str = "shared", replan: Replan | None = None) -> None:
        self.mininet, self.graph, self.plan, self.rules = mininet, graph, plan, dict(rules)
        self.slot_policy = slot_policy
        self.jobs, self.host_addrs, self.p4info = list(jobs), host_addrs, p4info
        self.say, self.fail = say, fail
        # how a plan is made again without a switch: one job's by default; several jobs'
        # (docs/design.md §3.10) also give every job its new plan (the SwitchJobs)
        self.replan = replan or _replan_one_job
        self.events: list[FailoverEvent] = []
        self._killed_at: dict[str, float] = {}
        # the running jobs' control records and how a plan becomes their schedules
        self._followers: list[tuple[Path, Callable[[Plan], dict], int | None]] = []
        # a fail-over's re-assigned trees whose rules wait for a round (_retree_rules)
        self._pending: tuple[FailoverEvent, list[SwitchJob]] | None = None
        self.newest_round = -1

    def follow(self, control_file: Path | None,
               schedules: Callable[[Plan], dict] | None, more: bool = False,
               job_id: int | None = None) -> None:
        """Start watching a job: its control record (``JobConfig.control_file``; the
        requests go to its PS beside it), and how a plan becomes its workers' schedules
        (None for modes whose schedules do not depend on the plan).  ``more``: one more job
        running at the same time (else the job replaces the last).  ``job_id``: the job's
        (a hierarchical job's new tree goes to its PS with the schedules it gives)."""
        if not more:
            self._followers = []
            self.newest_round = -1
        if control_file and schedules:
            self._followers.append((control_file, schedules, job_id))

    def sync_tree(self, job_id: int, tree: Tree | None) -> None:
        """Before a launch of job ``job_id``: the switches hold ``tree``, the one its job file
        holds (a fail-over in an earlier launch left them the re-assigned one, numbered from
        the tree before it; the new launch's file numbers the tree of the current plan)."""
        jobs = [replace(j, tree=tree) if j.job_id == job_id and j.tree is not None
                and tree is not None and j.tree != tree else j for j in self.jobs]
        if all(a is b for a, b in zip(jobs, self.jobs, strict=True)):
            return
        if self._pending is not None and any(j.job_id == job_id for j in self._pending[1]):
            self._pending = None
        rules = switch_rules(self.graph, self.plan, self.mininet.plan.ports, self.host_addrs,
                             jobs, self.slot_policy)
        try:
            update_rules(self.mininet, self.rules, rules, self.p4info)
        except DeployError as exc:
            raise ExperimentError(f"job {job_id}'s aggregation tree: {exc}") from None
        self.rules, self.jobs = rules, jobs

    def on_worker_round(self, round_: int) -> None:
        """A worker reported ``round_`` (its ``round`` event)."""
        self.newest_round = max(self.newest_round, round_)

    def on_control(self, event: ControlEvent) -> None:
        """A PS wrote a control record version: a schedule change it took later than asked
        moves the fail-over's ``schedules_from_round``."""
        switch = event.cause.get("switch")
        if event.kind != "schedules" or switch is None:
            return
        for ev in reversed(self.events):
            if ev.switch == switch:
                ev.schedules_from_round = max(ev.schedules_from_round, event.from_round)
                return

    def alive(self) -> list[str]:
        return [s for s in self.plan.switch_ids if s in self.graph]

    def poll(self) -> None:
        if self.fail and self.newest_round >= self.fail[1] and self.fail[0] not in self._killed_at:
            self._kill(self.fail[0])
        if self._pending is not None and (
                self.newest_round >= self._pending[0].schedules_from_round - 1):
            self._retree_rules()
        for s in self.alive():
            proc = self.mininet.net.get(s).proc
            if proc is None or proc.poll() is not None:
                self._fail_over(s)

    # -- internals -------------------------------------------------------------------------

    def _gamma(self, graph: nx.Graph, plan: Plan, jobs: list[SwitchJob]) -> float:
        """The plan's γ; with one followed job that is hierarchical, its tree's
        (:func:`controller.plan.hierarchy.tree_gamma`: what its launch is predicted at)."""
        followed = {i for *_, i in self._followers}
        trees = [j for j in jobs if j.job_id in followed and j.tree is not None]
        if len(self._followers) != 1 or len(trees) != 1:
            return plan_gamma(plan)
        j = trees[0]
        return tree_gamma(graph, (j.plan or plan).job, j.tree, result_load=plan.result_load)

    def _retree_rules(self) -> None:
        """The re-assigned trees' rules, once a worker finished the round before the
        schedule change (the PS completed it: no slot of it is waited for any more).  A
        child that comes to its new parent before this is sent on to the PS, and a slot
        that straddles the write completes by a retransmission's flush: exact either way."""
        assert self._pending is not None
        event, full = self._pending
        self._pending = None
        rules = switch_rules(self.graph, self.plan, self.mininet.plan.ports, self.host_addrs,
                             full, self.slot_policy)
        try:
            writes = update_rules(self.mininet, self.rules, rules, self.p4info)
        except DeployError as exc:
            raise ExperimentError(f"fail-over after switch {event.switch} died: "
                                  f"{exc}") from None
        self.rules, self.jobs = rules, full
        event.writes += sum(writes.values())
        self.say(f"switch {event.switch}: the re-assigned aggregation tree's rules, "
                 f"{sum(writes.values())} writes, after round {self.newest_round}")

    def _kill(self, switch: str) -> None:
        sw = self.mininet.net.get(switch)
        if len(getattr(sw, "group", (switch,))) > 1:  # its process runs other switches too
            raise ExperimentError(f"cannot kill switch {switch} alone: its process runs "
                                  f"{', '.join(sw.group)} (--switches-per-process 1)")
        proc = sw.proc
        self.say(f"[fault injection] killing switch {switch} after round {self.newest_round}")
        self._killed_at[switch] = time.monotonic()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def _fail_over(self, dead: str) -> None:
        noticed, after = time.monotonic(), self.newest_round
        killed = self._killed_at.get(dead)
        self.say(f"switch {dead} is down (after round {after}): re-planning")
        graph, plan, jobs = self.replan(self.graph, self.plan, dead, self.jobs)  # may stop
        # a hierarchical job's re-assigned tree goes to its PS with the schedules; its rules
        # wait until the rounds before those schedules are complete (poll): until then the
        # switches hold the old tree without the dead switch (without_switch)
        full = [_retree(j, graph, plan) for j in jobs]
        dead_id = int(self.plan.switch_ids[dead])
        now = [j if f is j or j.tree is None else replace(j, tree=without_switch(j.tree, dead_id))
               for j, f in zip(jobs, full, strict=True)]
        replanned = time.monotonic()
        rules = switch_rules(graph, plan, self.mininet.plan.ports, self.host_addrs, now,
                             self.slot_policy)
        try:
            writes = update_rules(self.mininet, self.rules, rules, self.p4info)
        except DeployError as exc:
            raise ExperimentError(f"fail-over after switch {dead} died: {exc}") from None
        deployed = time.monotonic()
        start = self.newest_round + SCHEDULE_DELAY_ROUNDS  # rounds went on meanwhile
        event = FailoverEvent(
            switch=dead, after_round=after,
            detected_s=round(noticed - killed, 4) if killed is not None else None,
            replan_s=round(replanned - noticed, 4), redeploy_s=round(deployed - replanned, 4),
            writes=sum(writes.values()),
            gamma_before=self._gamma(self.graph, self.plan, self.jobs),
            gamma_after=self._gamma(graph, plan, full),
            deployed_after=list(plan.deployed), schedules_from_round=start)
        self.events.append(event)  # before the requests: the PSs' answers update it
        trees = {j.job_id: f.tree for j, f in zip(jobs, full, strict=True)
                 if f is not j and f.tree is not None}
        for path, schedules, job_id in self._followers:
            # a job whose PS has exited has no round left to change
            request = {"kind": "schedules", "from_round": start, "schedules": schedules(plan),
                       "cause": {"switch": dead}}
            if job_id in trees:  # the tree the rules hold, and its first points
                request["tree"] = trees[job_id].to_json()
                request["schedules"] = tree_schedules(trees[job_id], request["schedules"])
            ask_ps(self.mininet, path, request)
        self.graph, self.plan, self.rules, self.jobs = graph, plan, rules, now
        self._pending = (event, full) if trees else None
        self.say(f"switch {dead}: γ {event.gamma_before:.4g} → {event.gamma_after:.4g}, "
                 f"deployed {plan.deployed or '(none: the PS ToR aggregates)'}, "
                 f"{event.writes} writes to {len(rules)} switches in "
                 f"{event.redeploy_s:.2f} s; "
                 f"new schedules asked from round {start}")


def _retree(job: SwitchJob, graph: nx.Graph, plan: Plan) -> SwitchJob:
    """A hierarchical job's tree after a switch died: over the new plan's deployment and
    routing, every surviving child keeping its parent and index where it can, and no new
    child taking an index the old tree had (the rules change in the middle of a round, so
    a slot's bit must keep its meaning; the PS reads each round with its tree)."""
    if job.tree is None or not set(job.tree.children) - {job.tree.root}:
        return job  # flat, PS-only or ToR-only: no switch of the deployment in it
    jp = (job.plan or plan).job
    members = [w for i, w in enumerate(job.workers) if i not in job.removed]
    try:
        tree = aggregation_tree(graph, jp, plan.switch_ids, members, previous=job.tree,
                                reuse=False)
    except PlanError as exc:
        raise ExperimentError(f"fail-over: job {job.job_id}: {exc}") from None
    return replace(job, tree=tree)


def tree_schedules(tree: Tree, schedules: Mapping[str, list]) -> dict[str, list]:
    """``schedules`` (worker id -> [(chunk, agg_id, fan_in)]) sent to ``tree``'s first
    points: each worker's chunks to its first aggregation point (0: the PS)."""
    out = {}
    for w, sched in schedules.items():
        first = tree.first[int(w)]
        fan = tree.fan_in(first) if first else 1
        out[w] = [(c, first, fan) for c, *_ in sched]
    return out


# ------------------------------------------------------------------ a worker that dies

WORKER_POLICIES = ("stop", "continue")


def parse_kill_worker(text: str, workers: list[str], rounds: int) -> tuple[str, int]:
    """``HOST@ROUND`` → (worker host, round), or one ExperimentError naming the option."""
    name, sep, rnd = text.partition("@")
    if not sep or not _round_text(rnd):
        raise ExperimentError(f"--kill-worker: expected HOST@ROUND, got {text[:60]!r}")
    name, r = name.strip(), int(rnd)
    if name not in workers:
        raise ExperimentError(f"--kill-worker: {name!r} is not a worker of the job "
                              f"({', '.join(workers)})")
    if len(workers) < 2:
        raise ExperimentError("--kill-worker needs at least 2 workers")
    if rounds < 2 or not 0 <= r < rounds - 1:
        raise ExperimentError(f"--kill-worker: round {r} must be in 0..{max(0, rounds - 2)} "
                              f"(the worker dies after that round; --rounds {rounds})")
    return name, r


class WorkerStopped(ExperimentError):
    """``--on-worker-failure stop``: a worker died and the job stops (one line)."""

    record: dict | None = None  # the job's finished rounds, for results.json (methods/ina/method.py)


@dataclass
class WorkerFailureEvent:
    worker: str
    worker_id: int
    cause: str  # "exit" (its process ended) or "silent" (the PS stopped hearing it)
    exit_code: int | None
    round_noticed: int  # the round it was synchronizing: its last reported round + 1
    policy: str  # --on-worker-failure
    job_mode: str  # ina / tor_only / ps_only
    round_effective: int | None = None  # first round without it (the PS's choice); continue
    detected_s: float | None = None  # from the injected kill to the notice
    writes: int = 0  # rule differences written to the switches
    redeploy_s: float = 0.0


class WorkerMonitor:
    """Notices a worker that dies during one job and applies ``--on-worker-failure``
    (docs/design.md §9).

    It sees every event of the job's processes (:meth:`on_event`: the workers' ``round``, the
    PS's ``silent`` and ``control``), every failed node process (``on_failure``, the
    runner's hook; True = the worker left the job) and every poll (``poll``: fault
    injection, silences).  ``stop`` asks the PS and the survivors to end (they write what
    they finished) and raises :class:`WorkerStopped`.  ``continue`` takes the worker out of
    the job: the survivors' schedules are planned again
    (:func:`controller.plan.replan.replan_members`, for the ``ina`` mode), the PS is asked to
    drop it (a request on the channel beside the job's control record; the PS picks the
    round and writes the record the workers follow), and only the rule differences (the
    job's mask, the worker's membership entry, the RESULT tree) are written to the
    switches, as for a dead switch."""

    def __init__(self, switches: SwitchMonitor, policy: str, say: Callable[[str], None],
                 kill: tuple[str, int] | None = None, scope: Iterable[str] | None = None,
                 label: str = "") -> None:
        if policy not in WORKER_POLICIES:
            raise ExperimentError(f"--on-worker-failure: expected stop or continue, "
                                  f"got {policy!r}")
        self.switches, self.policy, self.say, self.kill = switches, policy, say, kill
        self.events: list[WorkerFailureEvent] = []
        # Several jobs at once (docs/design.md §3.10): ``scope`` is this job's hosts (its PS
        # and workers), the only processes ``stop`` ends; a stop then ends this job alone
        # (``stopped`` says why) instead of raising WorkerStopped for the whole run.
        self.scope = set(scope) if scope is not None else None
        self.label = label
        self.stopped: str | None = None

    def begin(self, job_mode: str, job: SwitchJob, ps: str, control_file: Path,
              schedules: Callable[[list[str]], dict | None]) -> None:
        """A new job (one mode) with its control record (``JobConfig.control_file``): every
        worker is a member again; ``schedules(survivors)`` gives the survivors' schedules
        keyed by worker id (None: they do not change)."""
        self.job_mode, self.ps, self.control_file = job_mode, ps, control_file
        self.schedules = schedules
        self._first_event = len(self.events)  # events of earlier jobs are theirs
        self.workers = list(job.workers)
        self.removed: set[int] = set()
        self.reported: dict[str, int] = {}  # host -> newest round it finished
        self.requests: list[dict] = []  # sent to the PS, in order
        self.procs: Any = None
        self._silent: list[str] = []
        self._killed_at: float | None = None
        self._gone: set[str] = set()  # silent workers whose process this monitor ended
        self.stopped = None
        self._set_job(job.job_id, frozenset())  # a worker removed in the last repeat is back

    def on_procs(self, procs: Any) -> None:
        self.procs = procs

    def on_event(self, host: str, event: Event) -> None:
        """An event printed by ``host``, one of the job's processes."""
        if isinstance(event, RoundEvent):
            self.reported[host] = max(self.reported.get(host, -1), event.round)
        elif isinstance(event, ControlEvent) and event.kind == "members":
            for ev in self.job_events:
                if ev.round_effective is None and ev.policy == "continue":
                    ev.round_effective = event.from_round
        elif isinstance(event, SilentEvent):
            self._silent += [self.workers[i] for i in event.workers
                             if 0 <= i < len(self.workers)]

    def poll(self) -> None:
        # the victim's own report: killed on another worker's, it could die before its own
        # report of ROUND was read, and the death would be noticed a round early
        if (self.kill is not None and self._killed_at is None and self.procs is not None
                and self.reported.get(self.kill[0], -1) >= self.kill[1]):
            host = self.kill[0]
            self.say(f"[fault injection] killing worker {host} after round "
                     f"{self.reported[host]}")
            self._killed_at = time.monotonic()
            self.procs.procs[host].kill()
        while self._silent and self.stopped is None:
            host = self._silent.pop(0)
            if host in self._gone:
                continue
            if self.policy == "stop":
                self._fail(host, None, "silent")
            else:  # end it, so it cannot come back mid-job; its exit takes it out
                self.say(f"worker {host} is silent: ending its process")
                self._gone.add(host)
                self.procs.procs[host].kill()

    def on_failure(self, host: str, code: int) -> bool:
        if self.stopped is not None and self.scope is not None and host in self.scope:
            return True  # this job already stopped: its processes were ended on purpose
        if host not in self.workers or host in self.removed_hosts():
            return False
        cause = "silent" if host in self._gone else "exit"
        return self._fail(host, code, cause)

    @property
    def job_events(self) -> list[WorkerFailureEvent]:
        """The events of the current job (since :meth:`begin`)."""
        return self.events[self._first_event:]

    def removed_hosts(self) -> list[str]:
        return [self.workers[b] for b in sorted(self.removed)]

    # -- internals -------------------------------------------------------------------------

    def _fail(self, host: str, code: int | None, cause: str) -> bool:
        bit = self.workers.index(host)
        r = self.reported.get(host, -1) + 1
        ev = WorkerFailureEvent(
            worker=host, worker_id=bit, cause=cause, exit_code=code, round_noticed=r,
            policy=self.policy, job_mode=self.job_mode,
            detected_s=(round(time.monotonic() - self._killed_at, 4)
                        if self._killed_at is not None and self.kill
                        and self.kill[0] == host else None))
        self.events.append(ev)
        what = (f"died (exit code {code})" if cause == "exit"
                else "went silent (the PS heard nothing from it)")
        if self.policy == "stop":
            if self.scope is None:
                self._end_all()
            why = f"worker {host} {what} in round {r}; the job stops"
            if self.scope is None:
                raise WorkerStopped(why)
            self.stop_job(why)
            return True
        survivors = [w for i, w in enumerate(self.workers)
                     if i != bit and i not in self.removed]
        if not survivors:
            raise ExperimentError(f"worker {host} {what} in round {r}: no worker is left; "
                                  "the job stops")
        self.say(f"worker {host} {what} in round {r}: the job goes on with "
                 f"{', '.join(survivors)}")
        self.removed.add(bit)
        # the PS first: exactness depends only on the PS and the workers agreeing on the
        # members of each round; the switches' rules only decide how fast a round completes
        sched = self.schedules(survivors)
        request = {"kind": "members", "removed": sorted(self.removed), "cause": {"worker": host},
                   **({"schedules": sched} if sched is not None else {})}
        self.requests.append(request)
        if not ask_ps(self.switches.mininet, self.control_file, request):
            self.say(f"worker {host}: the job's PS is not running; nothing to change")
        t0 = time.monotonic()
        ev.writes = self._set_job(self.switches.jobs[self._job_index].job_id,
                                  frozenset(self.removed))
        ev.redeploy_s = round(time.monotonic() - t0, 4)
        self.say(f"worker {host}: {ev.writes} rule writes in {ev.redeploy_s:.2f} s")
        return True

    def _set_job(self, job_id: int, removed: frozenset[int]) -> int:
        """Make the switches' entries of ``job_id`` those of the members without
        ``removed``: only the differences are written (no pipeline push: slots of chunks in
        flight survive)."""
        sm = self.switches
        self._job_index = next(i for i, j in enumerate(sm.jobs) if j.job_id == job_id)
        old = sm.jobs[self._job_index]
        if old.removed == removed:
            return 0
        sm.jobs[self._job_index] = replace(old, removed=removed)
        rules = switch_rules(sm.graph, sm.plan, sm.mininet.plan.ports, sm.host_addrs, sm.jobs,
                             sm.slot_policy)
        try:
            writes = update_rules(sm.mininet, sm.rules, rules, sm.p4info)
        except DeployError as exc:
            raise ExperimentError(f"removing a worker from job {job_id}: {exc}") from None
        sm.rules = rules
        return sum(writes.values())

    def stop_job(self, why: str) -> None:
        """End this job alone (several jobs at once: ``scope`` set), with one line; its
        processes write what they finished."""
        self.stopped = f"{self.label}: {why}" if self.label else why
        self.say(self.stopped)
        self._end_all()

    def _end_all(self) -> None:
        """SIGTERM to the PS and the workers still running, which then write what they
        finished (a silent worker too: it may be hung, not dead)."""
        if self.procs is None:
            return
        mine = [p for h, p in self.procs.procs.items() if self.scope is None or h in self.scope]
        for proc in mine:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 10.0
        for proc in mine:
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
