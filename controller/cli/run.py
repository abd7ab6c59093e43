"""``python -m controller run``: the options every method shares, and dispatch to the method
(:data:`controller.experiment.registry.METHODS`; each adds its own options)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from controller.errors import ExperimentError
from controller.experiment.failover import parse_fail_switch
from controller.experiment.methods.ina import Settings
from controller.experiment.network import SlotsOption
from controller.experiment.registry import DEFAULT_METHOD, METHODS
from controller.experiment.runner import execute
from controller.options import finite_float, int_option, read_topology
from controller.plan.document import resolve_workers
from controller.plan.lp import PlanError
from topo.models import TopologyError
from workers.ina.job import MODES

__all__ = ["add_run_parser", "cmd_run", "check_run_options", "MAX_ROUNDS", "MAX_HIDDEN",
           "MAX_REPEATS", "MAX_WINDOW"]

# Sizes refused before anything starts: a typo (an extra zero or three) must not turn into a
# multi-gigabyte model or a run that cannot end in a day.
MAX_ROUNDS = 1_000_000
MAX_HIDDEN = 100_000  # 64·H + 10·H parameters per model copy (7.4 M at the limit)
MAX_REPEATS = 1_000
MAX_WINDOW = 65_536


def add_run_parser(sub: Any, add_subcommand: Any) -> None:
    d = Settings()
    p = add_subcommand(sub, "run", cmd_run,
                       "run a synchronization experiment over Mininet (root; default: INA)")
    p.add_argument("--method", choices=sorted(METHODS), default=DEFAULT_METHOD,
                   help="; ".join(dict.fromkeys(cls.help for cls in METHODS.values())))
    for cls in dict.fromkeys(METHODS.values()):  # a class may serve several names
        cls.add_arguments(p)
    p.add_argument("--topo", default=d.topo, help=f"topology spec (default {d.topo})")
    p.add_argument("--ps", default=d.ps, help="parameter server host")
    p.add_argument("--workers", default=d.workers, help="NAME,NAME,... or a COUNT")
    p.add_argument("--budget", type=int_option(0), default=d.budget,
                   help="programmable switches (M)")
    p.add_argument("--rounds", type=int_option(1, MAX_ROUNDS), default=d.rounds,
                   help="training rounds per mode")
    p.add_argument("--model", choices=["mlp", "logreg"], default=d.model)
    p.add_argument("--hidden", type=int_option(1, MAX_HIDDEN), default=d.hidden,
                   help="MLP hidden units (sets the gradient size)")
    p.add_argument("--bw", type=finite_float, default=d.bw,
                   help=f"link bandwidth in Mbit/s (TCLink; default {d.bw:g}; 0 = unshaped)")
    p.add_argument("--loss", type=finite_float, default=0.0,
                   help="drop probability on every port")
    p.add_argument("--dup", type=finite_float, default=0.0, help="duplication probability")
    p.add_argument("--reorder", type=finite_float, default=0.0, help="reordering probability")
    p.add_argument("--seed", type=int_option(0), default=0)
    p.add_argument("--repeats", type=int_option(1, MAX_REPEATS), default=1, metavar="N",
                   help="run every mode N times, seeds --seed .. --seed+N-1, and report "
                        "mean±std (default 1)")
    p.add_argument("--target", choices=["pyswitch", "bmv2"], default=d.target)
    p.add_argument("--modes", default=",".join(d.modes),
                   help="comma list of ina, tor_only, ps_only")
    p.add_argument("--window", type=int_option(1, MAX_WINDOW), default=d.window,
                   help="chunks in flight per worker")
    p.add_argument("--timeout", type=finite_float, default=d.timeout,
                   help="first retransmission timeout (s)")
    p.add_argument("--round-timeout", type=finite_float, default=d.round_timeout)
    p.add_argument("--fail-switch", metavar="SWITCH@ROUND", default=None,
                   help="fault injection: kill SWITCH once a worker finished ROUND; the "
                        "controller notices, re-plans without it and redeploys (docs/design.md §9)")
    p.add_argument("--slots", type=int, action=SlotsOption, default=None, metavar="N",
                   help="aggregator slots per switch (compiles ina.p4 with -D INA_NUM_SLOTS=N; "
                        "default: constants.p4's; docs/protocol.md §2)")
    p.add_argument("--out", default=d.out, help="results folder")
    p.add_argument("--name", default="", help="run name (default: a timestamp)")


def _check_out(out: str, name: str) -> None:
    """``--out`` must be (or become) a folder we can write in, and ``--name`` one folder
    inside it; found now rather than when the first mode's results are written."""
    if not out.strip() or "\0" in out:
        raise ExperimentError(f"--out {out!r}: not a usable folder name")
    if name in (".", "..") or "/" in name or "\0" in name or len(name) > 200:
        raise ExperimentError(f"--name {name[:40]!r}: must be one folder name (no '/', "
                              "not '.' or '..', at most 200 characters)")
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise ExperimentError(f"--out {out}: exists and is not a folder")
    folder = next((d for d in (p, *p.parents) if d.exists()), Path("."))
    if not folder.is_dir():
        raise ExperimentError(f"--out {out}: {folder} is not a folder")
    try:  # permission bits do not answer this for root nor on a read-only file system
        fd, tmp = tempfile.mkstemp(prefix=".insync-probe.", dir=folder)
    except OSError as exc:
        raise ExperimentError(f"--out {out}: cannot write in {folder} "
                              f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)


def check_run_options(args: argparse.Namespace) -> None:
    """Every shared option checked before a method is built or any network starts (one
    ExperimentError naming the option)."""
    if args.method != "ina" and args.fail_switch:
        raise ExperimentError("--fail-switch applies to --method ina (the INA experiment)")
    if args.method != "ina" and (getattr(args, "kill_worker", None)
                                 or getattr(args, "on_worker_failure", "stop") != "stop"):
        raise ExperimentError("--kill-worker and --on-worker-failure continue apply to "
                              "--method ina (the INA experiment)")
    if args.repeats < 1:
        raise ExperimentError(f"--repeats must be >= 1, got {args.repeats}")
    for what, v in (("--timeout", args.timeout), ("--round-timeout", args.round_timeout)):
        if not v > 0:
            raise ExperimentError(f"{what} must be > 0 seconds, got {v}")
    if args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    for what, v in (("--loss", args.loss), ("--dup", args.dup), ("--reorder", args.reorder)):
        if not 0 <= v < 1:
            raise ExperimentError(f"{what} must be in [0, 1), got {v}")
    _check_out(args.out, args.name)
    if args.method == "ina":  # its topology, workers and fault spec, as prepare() reads them
        try:
            graph = read_topology(args.topo)
            if getattr(args, "jobs", None) is None:  # --jobs names every job's hosts instead
                if args.ps not in graph or graph.nodes[args.ps].get("kind") != "host":
                    raise ExperimentError(f"--ps {args.ps[:40]!r} is not a host of the "
                                          "topology")
                resolve_workers(graph, args.ps, args.workers)
        except (TopologyError, PlanError) as exc:
            raise ExperimentError(str(exc)) from None
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        bad = [m for m in modes if m not in MODES]
        if not modes or bad:
            raise ExperimentError(f"--modes: unknown mode {(bad or [''])[0][:40]!r} "
                                  f"(expected {', '.join(MODES)})")
        if args.fail_switch:
            rnd = args.fail_switch.partition("@")[2].strip()
            if not (rnd.isascii() and rnd.isdigit() and len(rnd) <= 9):
                raise ExperimentError(f"--fail-switch: expected SWITCH@ROUND, got "
                                      f"{args.fail_switch[:40]!r}")
            parse_fail_switch(args.fail_switch, graph, args.rounds)


def cmd_run(args: argparse.Namespace) -> int:
    check_run_options(args)
    execute(METHODS[args.method](args), argv=getattr(args, "command_line", None))
    return 0
