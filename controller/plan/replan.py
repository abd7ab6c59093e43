"""Re-planning after a switch dies (docs/design.md §9): pure, no I/O.

A dead switch leaves the network as the graph without it.  If the PS or a worker can no longer
reach the PS's ToR, the job cannot go on (:class:`SwitchFailureError` names the hosts cut off).
Otherwise the job is planned again on what is left, with the surviving programmable switches:
the deployment set cannot grow (programmability is hardware), so the new plan solves the LP of
docs/design.md §3.3 for S' = S \\ {dead} on the reduced graph, and the dead switch's share of the
gradient falls back to the PS's ToR (its chunks join s_d's full-mask aggregation).

Switch ids stay those of the original plan, so that packets already in flight, and workers
that still use the old schedule for a round or two, keep meaning the same switches; the dead
switch's id is *retired*: the rule installer routes it like agg_id 0 (toward the PS, which
merges whatever reaches it by bitmap), see :func:`controller.dataplane.deploy.switch_rules`.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from controller.errors import ExperimentError
from controller.plan.document import build_plan
from controller.plan.jobs import JobEntry
from controller.plan.joint import plan_jobs
from controller.plan.lp import make_job, solve_lp
from controller.plan.lp_jobs import make_jobset, solve_jobs_lp
from controller.plan.types import Plan
from topo.models import natural_key


class SwitchFailureError(ExperimentError):
    """The job cannot survive a switch's death (hosts cut off from the PS)."""


def without_switch(graph: nx.Graph, dead: str) -> nx.Graph:
    """A copy of ``graph`` without switch ``dead`` and its links."""
    if dead not in graph or graph.nodes[dead].get("kind") != "switch":
        raise ValueError(f"{dead!r} is not a switch of the topology")
    g = nx.Graph(graph)
    g.remove_node(dead)
    return g


def cut_off(graph: nx.Graph, ps: str, hosts: list[str]) -> list[str]:
    """The ``hosts`` (and the PS itself, first) that have no path to ``ps`` in ``graph``
    through switches only (hosts do not forward)."""
    switches_only = graph.subgraph(
        [n for n, k in graph.nodes(data="kind") if k == "switch"] + [ps])
    reach = nx.node_connected_component(switches_only, ps)
    if len(reach) == 1:
        return [ps, *hosts]
    out = []
    for h in hosts:
        if not any(nb in reach for nb in graph.adj[h]):
            out.append(h)
    return out


def replan_without(graph: nx.Graph, plan: Plan, dead: str) -> tuple[nx.Graph, Plan]:
    """The network and plan after switch ``dead`` died (module docstring).

    Returns ``(reduced graph, new plan)``; the new plan keeps the original ``switch_ids``
    (without ``dead``), lists ``dead`` under ``failed``, and its γ is the LP's for the
    surviving deployment on the reduced graph.  Raises :class:`SwitchFailureError` when the
    PS or a worker is cut off."""
    old = plan.job
    ps, workers = old.ps, list(old.workers)
    g = without_switch(graph, dead)
    lost = cut_off(g, ps, workers)
    if lost:
        if lost[0] == ps:
            raise SwitchFailureError(f"switch {dead} died: the PS {ps} is cut off from every "
                                     "worker; the job stops")
        raise SwitchFailureError(f"switch {dead} died: worker(s) {', '.join(lost)} cut off "
                                 f"from the PS {ps}; the job stops")
    job = make_job(g, ps, workers, ps_tor=old.ps_tor if old.ps_tor != dead else None,
                   result_load=plan.result_load)
    deployed = sorted((s for s in old.deployed if s != dead), key=natural_key)
    result = solve_lp(job, deployed)
    budget = plan.budget if plan.budget is not None else len(deployed)
    new = build_plan(job, result, budget=int(budget), spec=plan.topology.get("spec"),
                     switch_ids={s: int(i) for s, i in plan.switch_ids.items() if s != dead},
                     result_load=plan.result_load, failed=[*plan.failed, dead],
                     retired_ids=[*plan.retired_ids, int(plan.switch_ids[dead])])
    return g, new


def replan_jobs_without(graph: nx.Graph, plan: Plan, dead: str,
                        specs: Sequence[JobEntry]) -> tuple[nx.Graph, Plan]:
    """:func:`replan_without` for a plan of several jobs (docs/design.md §3.10): every job is
    planned again *jointly* on the reduced graph, with the surviving shared deployment
    S' = S \\ {dead} and the same objective; switch ids are kept and ``dead``'s id retired.
    A job whose PS or workers are cut off ends the run (:class:`SwitchFailureError`, naming
    the job): the other jobs' plans would otherwise count its traffic."""
    g = without_switch(graph, dead)
    for spec in specs:
        lost = cut_off(g, spec.ps, list(spec.workers))
        if lost:
            who = (f"its PS {spec.ps}" if lost[0] == spec.ps
                   else f"worker(s) {', '.join(lost)}")
            raise SwitchFailureError(f"switch {dead} died: job {spec.name!r}: {who} cut off; "
                                     "the run stops")
    js = make_jobset(g, specs, capacity=plan.capacity or None, result_load=plan.result_load)
    deployed = [s for s in plan.deployed if s != dead]
    res = solve_jobs_lp(js, deployed, objective=plan.objective or "maxmin")
    # the planned-alone reference is the original's; so are the topology, planner,
    # timings...: only the joint solution is new
    new = plan_jobs(js, res, budget=plan.budget, specs=specs,
                    alone={name: job.gamma_alone for name, job in plan.jobs.items()},
                    switch_ids={s: int(i) for s, i in plan.switch_ids.items() if s != dead},
                    topology=plan.topology, routing=plan.routing,
                    result_load=plan.result_load, planner=plan.planner,
                    baselines=plan.baselines, baseline_details=plan.baseline_details,
                    timings=plan.timings, failed=[*plan.failed, dead],
                    retired_ids=[*plan.retired_ids, int(plan.switch_ids[dead])])
    return g, new


def replan_members(graph: nx.Graph, plan: Plan, workers: list[str]) -> Plan:
    """The plan after workers left the job (docs/design.md §9, a worker that died): the same
    network, deployment and PS ToR, the LP solved again for the surviving ``workers`` (their
    shares of each switch change with the fan-in).  Switch ids, failed switches and retired
    ids are kept, so :func:`controller.dataplane.deploy.switch_rules` routes exactly as before; only
    the jobs' masks, memberships and RESULT trees differ, and the schedules."""
    if not workers:
        raise ExperimentError("every worker of the job has died; the job stops")
    old = plan.job
    job = make_job(graph, old.ps, list(workers), ps_tor=old.ps_tor,
                   result_load=plan.result_load)
    result = solve_lp(job, list(old.deployed))
    budget = plan.budget if plan.budget is not None else len(old.deployed)
    return build_plan(job, result, budget=int(budget), spec=plan.topology.get("spec"),
                      switch_ids=plan.switch_ids, result_load=plan.result_load,
                      failed=list(plan.failed), retired_ids=list(plan.retired_ids),
                      job_extra={"removed_workers": [w for w in old.workers
                                                     if w not in workers]})
