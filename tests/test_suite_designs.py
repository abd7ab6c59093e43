"""The suite's host-driven designs in the simulated network under loss: the ring all-reduce
(workers/ring) and the SwitchML-style program (switchml.p4 on the PS's ToR, every other
switch running ina.p4) on make run's network at 1 % loss on every switch port, every sum of
every worker exact, the losses recovered (retransmissions; SwitchML's shadow copies)."""

from __future__ import annotations

from pathlib import Path

from bench.suite.cell import Cell, _ina_run, _vectors
from controller.experiment.methods.ina.core import Settings
from controller.experiment.methods.ring.sim import RingJob, simulate_ring
from controller.experiment.methods.switchml.sim import SmJob, simulate_switchml
from controller.experiment.simulate.network import SimOptions


def test_ring_and_switchml_exact_under_loss(tmp_path: Path) -> None:
    cell = Cell("makerun", "resnet50", 0.01, 1, scale=40_000, rounds=2)
    s = Settings(rounds=cell.rounds, model="resnet50", scale=cell.scale, bw=0.25,
                 loss=cell.loss, modes=("ps_only",))
    n = s.workload.n_values
    grad = _vectors(1, 6, n)
    doc, deployed = _ina_run(s, SimOptions(train=False, reference=False), tmp_path / "main",
                             grad)
    workers = doc["plan"]["workers"]
    ring = simulate_ring(deployed, [RingJob(1, workers, grad)], cell.rounds, seed=1)
    (job,) = ring.jobs
    assert job.exact == [True, True] and job.retransmissions > 0
    assert ring.impairment["dropped"] > 0
    sm = simulate_switchml(deployed, [SmJob(1, "h0", workers, grad)], cell.rounds,
                           pool_size=8, seed=1)
    assert sm.switch == "edge0"  # h0's ToR
    (smj,) = sm.jobs
    assert smj.exact == [True, True] and smj.retransmissions > 0
    assert sm.counters["completed"] == 2 * -(-n // 32)  # every chunk of both rounds, once
    assert sm.counters["dropped_nonmember"] == 0
