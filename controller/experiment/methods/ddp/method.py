"""``python -m controller run --method ddp``: real PyTorch DDP training through the switches
(docs/ddp.md).

The network, the plan and its deployment are the INA method's (:func:`plan_job`,
:func:`deployed_network`): ``--topo`` (default fat-tree k=4), ``--ps``, ``--workers`` (for this
method 4 unless given), ``--budget``, ``--bw``, ``--target``.  Then, per mode of
``--ddp-modes``, one ``torchrun`` agent per worker host (rank r on the plan's ``workers[r]``,
``--nnodes N --node-rank r``, the rendezvous on rank 0's address over the Mininet network)
runs ``--script`` (default ``examples/ddp_train.py``) with gloo for everything but the
gradient all-reduce:

* ``ina``: the script's DDP hook (``--ina-job``) sums every bucket through the deployed plan
  (:func:`controller.plan.document.chunk_schedule`), the PS (:mod:`workers.ina.ps_node`) completing what
  the switches did not;
* ``ps_only``: the same hook with every chunk raw to the PS (the no-aggregation baseline);
* ``gloo``: no hook, DDP's own gloo all-reduce; trained with ``--ddp-gloo-seeds`` seeds
  (``--seed`` upward), whose spread of final accuracy is the band INA's must fall in.

``--rounds`` is the number of training steps (one INA round per step).  The script's protocol
with this runner: ``--print-capacity`` ("C chunks per step (... parameters P)"), ``--steps``,
``--seed``, ``--eval-every``, ``--out`` (``rank<r>.json``, with ``--record`` ``rank<r>.npz``),
``--start-file``, ``--gloo-ifname``, ``--ina-job``, a ``rank R ready`` line and rank 0's
``step i/N loss L ...`` lines (the progress bar).

Reported per mode (``results.json`` ``modes``): ``exact_all_rounds`` (every rank's int32 bucket
sums equal the exact sum of all ranks' quantized buckets, :func:`workers.ddp.check.check_exact`;
null for gloo), ``time_per_step_s`` (mean over steps of the slowest rank's forward + backward +
optimizer step), ``ps_bytes_per_step`` (into the PS host; null for gloo),
``rank0_bytes_per_step`` (into rank 0's host), ``accuracy`` (``final`` and ``vs_steps``), and
per-step records with the keys every method shares (:mod:`controller.experiment.records`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from controller.dataplane.deploy import SwitchJob
from controller.errors import ExperimentError, parse_name_list
from controller.experiment.methods.ina.method import (
    JOB_IDS,
    deployed_network,
    plan_job,
    schedules_for,
    settings_from_args,
)
from controller.experiment.methods.ina.options import add_network_options, add_workload_options
from controller.experiment.methods.ina.workload import print_projection, workload_results
from controller.experiment.network import ROOT
from controller.experiment.records import seed_stats
from controller.experiment.runner import Launch, Method, Node, Run, Trial
from workers.common.quantize import choose_frac_bits
from workers.ddp.check import check_exact
from workers.ddp.job import ddp_job
from workers.ina.constants import INA_UDP_PORT

__all__ = ["DdpMethod", "MODES", "script_capacity", "mode_record", "gloo_band"]

MODES = ("ina", "ps_only", "gloo")
WORKLOAD_SCRIPT = "workers/ddp/workload.py"  # a real model's scaled gradient (docs/models.md)
DEFAULTS = {"script": "examples/ddp_train.py", "modes": ",".join(MODES), "gloo_seeds": 3,
            "master_port": 29500}
BAND_KEYS = ("seed", "accuracy", "time_per_step_s", "rank0_bytes_per_step", "loss")
BOUND = 8.0  # |gradient| the fixed-point scale is chosen for (the example's and INA's)


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """This method's own options besides INA's network, plan and transport."""
    d = DEFAULTS
    g.add_argument("--script", default=d["script"],
                   help=f"the DDP training script torchrun runs (default {d['script']})")
    g.add_argument("--ddp-modes", default=d["modes"],
                   help=f"comma list of {', '.join(MODES)} (default all three)")
    g.add_argument("--ddp-gloo-seeds", type=int, default=d["gloo_seeds"], metavar="N",
                   help="gloo trains with seeds --seed .. --seed+N-1: the accuracy band "
                        f"(default {d['gloo_seeds']})")
    g.add_argument("--ddp-args", default="", metavar="ARGS",
                   help="more options for the script, one string (e.g. '--batch-size 64')")


# ------------------------------------------------------------------ pure helpers


def script_capacity(script: Path, args: Sequence[str] = ()) -> tuple[int, int]:
    """``(chunks per step, parameters)`` the script's model needs (``--print-capacity``;
    ``args``: the script's own options that choose the model)."""
    proc = subprocess.run([sys.executable, str(script), *args, "--print-capacity"],
                          cwd=str(ROOT),
                          capture_output=True, text=True, timeout=120)
    m = re.search(r"(\d+) chunks per step.*parameters (\d+)", proc.stdout)
    if proc.returncode != 0 or m is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise ExperimentError(f"{script} --print-capacity failed: {tail}")
    return int(m.group(1)), int(m.group(2))


def mode_record(mode: str, seed: int, reports: list[dict], moved: dict[tuple[str, str], int],
                   rank0_link: tuple[str, str], ps_link: tuple[str, str] | None,
                   exact: dict | None, wall_s: float, grad_bytes: int) -> dict:
    """One mode's record from the ranks' reports (``rank<r>.json``) and the link bytes."""
    steps = len(reports[0]["steps"])
    per_step = [max(rep["steps"][i]["time_s"] for rep in reports) for i in range(steps)]
    ps_bytes = moved[ps_link] / steps if ps_link else None
    rank0_bytes = moved[rank0_link] / steps
    busiest = max(moved.values()) / steps
    rounds = []
    for i in range(steps):
        r0 = reports[0]["steps"][i]
        rec: dict[str, Any] = {"time_s": per_step[i],
                               "loss": float(np.mean([rep["steps"][i]["loss"] for rep in reports])),
                               "ps_rx_bytes": ps_bytes, "rank0_rx_bytes": rank0_bytes,
                               "busiest_link_bytes": busiest}
        if "accuracy" in r0:
            rec["accuracy"] = r0["accuracy"]
        if exact is not None:
            se = exact["step_exact"]
            rec["exact"] = bool(i < len(se) and se[i]) and len(se) == steps
        rounds.append(rec)
    curve = [{"step": i + 1, "accuracy": s["accuracy"]}
             for i, s in enumerate(reports[0]["steps"]) if "accuracy" in s]
    out: dict[str, Any] = {
        "mode": mode, "seed": seed, "steps": steps,
        "exact_all_rounds": None if exact is None else all(r["exact"] for r in rounds),
        "time_per_step_s": float(np.mean(per_step)),
        "time_per_step_median_s": float(np.median(per_step)),
        "wall_s": wall_s,
        "ps_bytes_per_step": ps_bytes,
        "rank0_bytes_per_step": rank0_bytes,
        "busiest_link_bytes_per_step": busiest,
        "accuracy": {"final": reports[0]["final_accuracy"], "vs_steps": curve},
        "loss": {"final": rounds[-1]["loss"]},
        "grad_bytes": grad_bytes,  # float32 gradient the step synchronizes
        "rounds": rounds,
    }
    if exact is not None:
        out["exact"] = {k: exact[k] for k in ("steps", "buckets", "mismatches")}
        out["retransmissions"] = sum(rep.get("retransmits", 0) for rep in reports)
        out["direct"] = sum(rep.get("direct", 0) for rep in reports)
        out["clipped"] = sum(rep.get("clipped", 0) for rep in reports)
    return out


def gloo_band(finals: list[float | None]) -> dict[str, Any]:
    """The spread of gloo's final accuracy over its seeds: the band INA's must fall in."""
    vals = [float(v) for v in finals if v is not None]
    return {"finals": finals, "min": min(vals) if vals else None,
            "max": max(vals) if vals else None, **seed_stats(finals)}


# ------------------------------------------------------------------ the method


class DdpMethod(Method):
    """PyTorch DDP with the INA hook, PS-only and gloo on one deployed network."""

    name = "ddp"
    help = "ddp: PyTorch DDP (torchrun per host) with gradients summed in the network"

    DEFAULT_WORKERS = "4"  # INA's 6 workers would be 6 ranks on 2 cores
    TABLE_WIDTH = 100

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """INA's network, plan and transport options (its defaults, 4 workers), and DDP's."""
        g = add_network_options(parser, "--method ddp (PyTorch DDP through the switches, "
                                        "docs/ddp.md; --rounds = training steps)",
                                workers=cls.DEFAULT_WORKERS)
        add_arguments(g)
        add_workload_options(g)

    def validate(self) -> None:
        import importlib.util

        a = self.args
        if importlib.util.find_spec("torch") is None:
            raise ExperimentError("--method ddp needs torch: pip install -e '.[ddp]' "
                                  "(CPU build: docs/ddp.md §1)")
        self.modes = parse_name_list(a.ddp_modes, "--ddp-modes", MODES, "mode")
        if a.ddp_gloo_seeds < 1:
            raise ExperimentError(f"--ddp-gloo-seeds must be >= 1, got {a.ddp_gloo_seeds}")
        s = self.s = settings_from_args(a)  # INA's network and plan: its checks too
        s.modes = tuple(m for m in self.modes if m != "gloo")
        self.workload = sw = s.workload
        if sw is not None and a.script != DEFAULTS["script"]:
            raise ExperimentError(f"--script: --model {s.model} runs {WORKLOAD_SCRIPT}")
        script = Path(a.script if sw is None else WORKLOAD_SCRIPT)
        self.script = script if script.is_absolute() else (ROOT / script)
        if not self.script.is_file():
            raise ExperimentError(f"--script {a.script}: no such file")
        self.script_args = shlex.split(a.ddp_args)
        self.model_args: list[str] = []
        if sw is not None:  # the model, its scale and the emulated compute per step
            self.model_args = ["--model", sw.model, "--scale", str(sw.scale),
                               "--compute-s", f"{sw.emulated_compute_s:.6f}"]

    def check_hosts(self, graph: Any) -> None:
        """Checked with INA's settings (``settings_from_args``)."""

    def settings(self, run: Run) -> dict[str, Any]:
        s, a = self.s, self.args
        self.capacity, self.parameters = script_capacity(self.script, self.model_args)
        self.eval_every = max(1, s.rounds // 10)
        return {
            "topo": s.topo, "ps": s.ps, "workers": s.workers, "budget": s.budget,
            "steps": s.rounds, "bw": s.bw, "loss": s.loss, "dup": s.dup, "reorder": s.reorder,
            "seed": s.seed, "target": s.target, "modes": list(self.modes),
            "window": s.base_window, "timeout": s.timeout, "round_timeout": s.round_timeout,
            "script": str(self.script.relative_to(ROOT) if self.script.is_relative_to(ROOT)
                          else self.script),
            "script_args": self.script_args, "gloo_seeds": a.ddp_gloo_seeds,
            "capacity": self.capacity, "parameters": self.parameters,
            "eval_every": self.eval_every, "repeats": self.repeats(),
            **({"model": s.model, "scale": self.workload.scale,
                "link_gbps": self.workload.link_gbps, "emulated_mbps": s.bw}
               if self.workload is not None else {})}

    def trials(self, run: Run) -> Iterator[Trial]:
        """Every mode for every seed; the first repeat keeps the folders it always had."""
        for rep, seed in enumerate(run.seeds):
            for m in self.modes:
                name = m if rep == 0 else f"{m}-seed{seed}"
                yield Trial(m, m, seed, rep, run.out_dir / name)

    @contextlib.contextmanager
    def network(self, run: Run, name: str = "") -> Iterator[Any]:
        """INA's planned network: the plan, then the switches with every INA mode's job."""
        s = self.s
        plan = self.plan = plan_job(s, self.graph, run.out_dir, run.console)
        self.workers = workers = list(plan.job.workers)
        self.frac_bits = choose_frac_bits(BOUND, len(workers))
        run.settings.update(ranks=workers, frac_bits=self.frac_bits)
        jobs = [SwitchJob(JOB_IDS[m], tuple(workers)) for m in s.modes]
        self.launches = 0  # each launch takes a fresh rendezvous port
        with deployed_network(run, s, self.graph, plan, jobs) as net:
            self.deploy_info = net.info
            yield net

    def run_trial(self, run: Run, trial: Trial, net: Any) -> dict[str, Any]:
        """One mode: its training run (gloo: and the band's further seeds)."""
        s, m, seed, workers = self.s, trial.kind, trial.seed, self.workers
        ip = {h: addr[0] for h, addr in net.hosts.items()}
        job = None
        if m != "gloo":
            job = ddp_job(
                job_id=JOB_IDS[m], mode=m, steps=s.rounds,
                worker_addrs=[(ip[w], INA_UDP_PORT) for w in workers],
                ps_addr=(ip[s.ps], INA_UDP_PORT),
                schedules=schedules_for(m, self.plan, workers, self.capacity),
                capacity=self.capacity, frac_bits=self.frac_bits,
                out_dir=str(trial.folder), window=s.base_window, timeout=s.timeout,
                round_timeout_s=s.round_timeout)
        # gloo's band: the same training from further seeds (a real model's gradients are
        # synthetic: no accuracy, no band)
        n_seeds = self.args.ddp_gloo_seeds if m == "gloo" and self.workload is None else 1
        recs = []
        for k in range(n_seeds):
            folder = (trial.folder if k == 0
                      else trial.folder.with_name(f"{trial.folder.name}-band{seed + k}"))
            label = m if k == 0 else f"{m} seed {seed + k}"
            # a fresh rendezvous port per launch: the last may be in TIME_WAIT
            port = DEFAULTS["master_port"] + self.launches
            self.launches += 1
            recs.append(self._run_mode(run, net.mininet, label, m, seed + k, folder, job,
                                       workers, port))
        rec = recs[0]
        if m == "gloo":
            rec["band"] = gloo_band([r["accuracy"]["final"] for r in recs])
            rec["band_runs"] = [{k: r[k] for k in BAND_KEYS} for r in recs]
        return rec

    def _run_mode(self, run: Run, mininet: Any, label: str, mode: str, seed: int, folder: Path,
                  job: Any, workers: list[str], port: int) -> dict:
        """One training run: the PS (INA modes), one torchrun per worker host; its record."""
        s = self.s
        folder.mkdir(parents=True, exist_ok=True)
        plan_hosts = mininet.plan.hosts
        start = folder / "start"
        servers = []
        script = [str(self.script), "--steps", str(s.rounds), "--seed", str(seed),
                  "--eval-every", str(self.eval_every), "--out", str(folder),
                  "--start-file", str(start), *self.model_args, *self.script_args]
        if job is not None:
            job_file = folder / "job.json"
            job.save(job_file)
            servers = [Node(s.ps, "workers.ina.ps_node", (str(job_file),))]
            script += ["--ina-job", str(job_file), "--record"]
        nodes = [Node(w, "torch.distributed.run", (
            "--nnodes", str(len(workers)), "--node-rank", str(r), "--nproc-per-node", "1",
            "--master-addr", plan_hosts[workers[0]].ip, "--master-port", str(port),
            *script, "--gloo-ifname", plan_hosts[w].interfaces[0]))
            for r, w in enumerate(workers)]
        task = run.progress.add_task(f"{label}: steps", total=s.rounds)

        def on_line(host: str, line: str) -> None:
            words = line.split()  # rank 0: "step I/N loss L T ms [acc A]"
            if host == workers[0] and len(words) > 3 and words[0] == "step" \
                    and words[2] == "loss":
                run.progress.update(task, completed=int(words[1].split("/")[0]),
                                    description=f"{label}: steps, loss {words[3]}")

        done = run.launch(mininet, Launch(
            label=label, out_dir=folder, nodes=nodes, servers=servers,
            nodes_what="the torchrun ranks", failed_what="rank", start_file=start,
            # the hook fails a bucket after round_timeout of no progress; this is for hangs
            timeout_s=120.0 + 10.0 * s.rounds, server_exit="stop", count_from="start",
            on_line=on_line))
        if servers and done.server_codes[s.ps] != 0:
            raise ExperimentError(f"{label}: the PS did not complete every step "
                                  f"(see {folder}/logs.txt)")
        reports = [json.loads((folder / f"rank{r}.json").read_text())
                   for r in range(len(workers))]
        exact = None
        if job is not None:
            exact = check_exact([folder / f"rank{r}.npz" for r in range(len(workers))])
        rank0_link = (plan_hosts[workers[0]].neighbours[0], workers[0])
        ps_link = (plan_hosts[s.ps].neighbours[0], s.ps) if job is not None else None
        return mode_record(mode, seed, reports, done.moved, rank0_link, ps_link, exact,
                              done.wall_s, 4 * self.parameters)

    def results(self, run: Run) -> dict[str, Any]:
        modes = run.modes
        plan = self.plan
        ina_modes = [m for m in ("ina", "ps_only") if m in modes]
        out: dict[str, Any] = {
            "run": run.name, "method": run.method, "settings": run.settings,
            "plan": {"gamma": plan.job.gamma, "deployed": plan.deployed, "ps": plan.job.ps,
                     "ps_tor": plan.job.ps_tor, "workers": plan.job.workers},
            "deploy": self.deploy_info, "modes": modes,
            "exact_all_rounds": all(modes[m]["exact_all_rounds"] for m in ina_modes)
            if ina_modes else None,
            **{key: {m: d[key] for m, d in modes.items()}
               for key in ("time_per_step_s", "ps_bytes_per_step", "rank0_bytes_per_step")},
            "accuracy": {"final": {m: d["accuracy"]["final"] for m, d in modes.items()}},
        }
        if self.workload is not None:  # the real cluster, projected (docs/models.md §3)
            out["workload"] = workload_results(
                self.workload, len(plan.job.workers),
                step_s={m: d["time_per_step_median_s"] for m, d in modes.items()})
        band = modes.get("gloo", {}).get("band")
        if band is not None and band["min"] is not None:
            acc = out["accuracy"]
            acc["gloo_band"] = band
            for m in ina_modes:
                a = modes[m]["accuracy"]["final"]
                acc[f"{m}_within_gloo_band"] = band["min"] <= a <= band["max"]
                acc[f"{m}_minus_gloo"] = a - modes["gloo"]["accuracy"]["final"]
        return out

    def plots(self, run: Run, results: dict[str, Any]) -> list[Path]:
        return [] if self.workload is not None else [plot_accuracy(run.modes, run.out_dir)]

    def tables(self, run: Run, results: dict[str, Any]) -> list[Any]:
        from rich.table import Table

        table = Table(title=f"ddp: {run.settings['steps']} steps, ranks "
                            f"{', '.join(run.settings.get('ranks', []))}")
        for col in ("mode", "s/step", "PS B/step", "rank0 B/step", "accuracy", "exact",
                    "retx"):
            table.add_column(col, justify="left" if col == "mode" else "right")
        for m, d in run.modes.items():
            ps = d["ps_bytes_per_step"]
            exact = d["exact_all_rounds"]
            final = d["accuracy"]["final"]
            acc = "—" if final is None else f"{final:.4f}"
            if "band" in d and d["band"]["n"] > 1:
                acc += f" [{d['band']['min']:.4f}, {d['band']['max']:.4f}]"
            table.add_row(m, f"{d['time_per_step_s']:.3f}", "—" if ps is None else f"{ps:.0f}",
                          f"{d['rank0_bytes_per_step']:.0f}", acc,
                          "—" if exact is None else str(exact),
                          str(d.get("retransmissions", "—")))
        return [table]

    def report(self, run: Run, results: dict[str, Any]) -> None:
        super().report(run, results)
        if results.get("workload"):
            print_projection(results["workload"], run.console)


def plot_accuracy(modes: dict[str, dict], out_dir: Path) -> Path:
    """Test accuracy vs steps, one line per mode (and per gloo seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for m, d in modes.items():
        runs = d.get("band_runs") or [{"seed": d["seed"], "accuracy": d["accuracy"]}]
        for i, r in enumerate(runs):
            curve = r["accuracy"]["vs_steps"]
            ax.plot([c["step"] for c in curve], [c["accuracy"] for c in curve],
                    marker="o", ms=3, alpha=1.0 if i == 0 else 0.4,
                    label=m if i == 0 else f"{m} seed {r['seed']}")
    ax.set_xlabel("step")
    ax.set_ylabel("test accuracy")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "accuracy.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
