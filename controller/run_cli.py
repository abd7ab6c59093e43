"""``python -m controller run``: the options every method shares, and dispatch to the method
(:data:`controller.registry.METHODS`; each adds its own options)."""

from __future__ import annotations

import argparse
from typing import Any

from controller.errors import ExperimentError
from controller.methods.ina import Settings
from controller.registry import DEFAULT_METHOD, METHODS
from controller.runner import execute

__all__ = ["add_run_parser", "cmd_run"]


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
    p.add_argument("--budget", type=int, default=d.budget, help="programmable switches (M)")
    p.add_argument("--rounds", type=int, default=d.rounds, help="training rounds per mode")
    p.add_argument("--model", choices=["mlp", "logreg"], default=d.model)
    p.add_argument("--hidden", type=int, default=d.hidden,
                   help="MLP hidden units (sets the gradient size)")
    p.add_argument("--bw", type=float, default=d.bw,
                   help=f"link bandwidth in Mbit/s (TCLink; default {d.bw:g}; 0 = unshaped)")
    p.add_argument("--loss", type=float, default=0.0, help="drop probability on every port")
    p.add_argument("--dup", type=float, default=0.0, help="duplication probability")
    p.add_argument("--reorder", type=float, default=0.0, help="reordering probability")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="run every mode N times, seeds --seed .. --seed+N-1, and report "
                        "mean±std (default 1)")
    p.add_argument("--target", choices=["pyswitch", "bmv2"], default=d.target)
    p.add_argument("--modes", default=",".join(d.modes),
                   help="comma list of ina, tor_only, ps_only")
    p.add_argument("--window", type=int, default=d.window, help="chunks in flight per worker")
    p.add_argument("--timeout", type=float, default=d.timeout, help="first retransmission timeout (s)")
    p.add_argument("--round-timeout", type=float, default=d.round_timeout)
    p.add_argument("--fail-switch", metavar="SWITCH@ROUND", default=None,
                   help="fault injection: kill SWITCH once a worker finished ROUND; the "
                        "controller notices, re-plans without it and redeploys (docs/design.md §9)")
    p.add_argument("--out", default=d.out, help="results folder")
    p.add_argument("--name", default="", help="run name (default: a timestamp)")


def cmd_run(args: argparse.Namespace) -> int:
    if args.method != "ina" and args.fail_switch:
        raise ExperimentError("--fail-switch applies to --method ina (the INA experiment)")
    if args.repeats < 1:
        raise ExperimentError(f"--repeats must be >= 1, got {args.repeats}")
    execute(METHODS[args.method](args), argv=getattr(args, "command_line", None))
    return 0
