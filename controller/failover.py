"""The controller's switch-failure monitor for the INA experiment (docs/design.md §9): the I/O
shell around :mod:`controller.replan`.

While a job runs, :meth:`SwitchMonitor.poll` (called by the runner's wait loop, every ~50 ms)
checks every switch's process.  When one has died it

1. re-plans on the surviving network (:func:`controller.replan.replan_without`; hosts cut off
   from the PS end the run with one error line),
2. writes the difference between the old and the new rules to every surviving switch over
   P4Runtime (:func:`controller.deploy.update`; no pipeline push, so the aggregator slots of
   chunks in flight survive): routes avoid the dead switch, and its agg_id is routed to the
   PS, so packets still addressed to it are merged there,
3. publishes the new chunk schedules in the job's schedule file, effective two rounds after
   the newest round a worker reported (a worker that is one round ahead of the reports never
   mixes schedules within a round; if one did, the retransmission rules still complete the
   round exactly, only later).

Packets in flight through the dead switch, or through a switch between two of its writes, are
lost; the workers' retransmissions recover them (docs/protocol.md §6).

The monitor watches the switch processes because that is what the testbed owns; a controller
of real switches would watch its P4Runtime stream channels the same way.  ``fail`` =
``(switch, round)`` kills that switch once a worker reported ``round`` (fault injection for
experiments and tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from controller.deploy import DeployError, JobSpec, SwitchRules, switch_rules, update
from controller.errors import ExperimentError
from controller.files import write_json_atomic
from controller.replan import replan_without

SCHEDULE_DELAY_ROUNDS = 2  # new schedules start this many rounds after the newest reported


def parse_fail_switch(text: str, graph: nx.Graph, rounds: int) -> tuple[str, int]:
    """``NAME@ROUND`` → (switch, round), or one ExperimentError naming the option."""
    name, sep, rnd = text.partition("@")
    if not sep or not rnd.strip().isdigit():
        raise ExperimentError(f"--fail-switch: expected SWITCH@ROUND, got {text!r}")
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
    schedules_from_round: int


class SwitchMonitor:
    """Watches the switches of a running INA network and fails over (module docstring).

    ``graph``/``plan`` are the current ones (replaced on every failover, so later modes of
    the run start on the degraded network); ``schedules(plan)`` gives the workers' schedules
    of a plan, keyed by worker id."""

    def __init__(self, mininet: Any, graph: nx.Graph, plan: dict,
                 rules: Mapping[str, SwitchRules], jobs: Iterable[JobSpec],
                 host_addrs: Mapping[str, tuple[str, str]], p4info: Path,
                 say: Callable[[str], None], fail: tuple[str, int] | None = None) -> None:
        self.mininet, self.graph, self.plan, self.rules = mininet, graph, plan, dict(rules)
        self.jobs, self.host_addrs, self.p4info = list(jobs), host_addrs, p4info
        self.say, self.fail = say, fail
        self.events: list[FailoverEvent] = []
        self._killed_at: dict[str, float] = {}
        self._job: tuple[Path, Callable[[dict], dict]] | None = None
        self._updates: list[dict] = []
        self.newest_round = -1

    def follow(self, schedule_file: Path | None,
               schedules: Callable[[dict], dict] | None) -> None:
        """Start watching a job: where its workers read schedule updates, and how a plan
        becomes their schedules (None for modes whose schedules do not depend on the plan)."""
        self._job = (schedule_file, schedules) if schedule_file and schedules else None
        self._updates = []
        self.newest_round = -1

    def on_worker_round(self, round_: int) -> None:
        self.newest_round = max(self.newest_round, round_)

    def alive(self) -> list[str]:
        return [s for s in self.plan["switch_ids"] if s in self.graph]

    def poll(self) -> None:
        if self.fail and self.newest_round >= self.fail[1] and self.fail[0] not in self._killed_at:
            self._kill(self.fail[0])
        for s in self.alive():
            proc = self.mininet.net.get(s).proc
            if proc is None or proc.poll() is not None:
                self._fail_over(s)

    # -- internals -------------------------------------------------------------------------

    def _kill(self, switch: str) -> None:
        proc = self.mininet.net.get(switch).proc
        self.say(f"[fault injection] killing switch {switch} after round {self.newest_round}")
        self._killed_at[switch] = time.monotonic()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def _fail_over(self, dead: str) -> None:
        noticed, after = time.monotonic(), self.newest_round
        killed = self._killed_at.get(dead)
        self.say(f"switch {dead} is down (after round {after}): re-planning")
        graph, plan = replan_without(self.graph, self.plan, dead)  # may stop the run
        replanned = time.monotonic()
        rules = switch_rules(graph, plan, self.mininet.plan.ports, self.host_addrs, self.jobs)
        addresses = {s: (self.mininet.grpc_address(s), self.mininet.device_id(s)) for s in rules}
        try:
            writes = update(self.rules, rules, addresses, self.p4info)
        except DeployError as exc:
            raise ExperimentError(f"fail-over after switch {dead} died: {exc}") from None
        deployed = time.monotonic()
        start = self.newest_round + SCHEDULE_DELAY_ROUNDS  # rounds went on meanwhile
        if self._job is not None:
            path, schedules = self._job
            self._updates.append({"from_round": start, "switch": dead,
                                  "schedules": schedules(plan)})
            write_json_atomic(path, self._updates)
        event = FailoverEvent(
            switch=dead, after_round=after,
            detected_s=round(noticed - killed, 4) if killed is not None else None,
            replan_s=round(replanned - noticed, 4), redeploy_s=round(deployed - replanned, 4),
            writes=sum(writes.values()),
            gamma_before=self.plan["gamma"], gamma_after=plan["gamma"],
            deployed_after=list(plan["deployed"]), schedules_from_round=start)
        self.events.append(event)
        self.graph, self.plan, self.rules = graph, plan, rules
        self.say(f"switch {dead}: γ {event.gamma_before:.4g} → {event.gamma_after:.4g}, "
                 f"deployed {plan['deployed'] or '(none: the PS ToR aggregates)'}, "
                 f"{event.writes} writes to {len(rules)} switches in "
                 f"{event.redeploy_s:.2f} s; "
                 f"new schedules from round {start}")
