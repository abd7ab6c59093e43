"""``python -m controller run``: the options every method shares, then the chosen method's own
(:data:`controller.experiment.registry.METHODS`; each declares them in ``add_arguments``).

``--method`` is read first and the parser is built for it, so a method only receives its own
options and defaults (another method's option is an unrecognized argument), and
``run --method X --help`` shows X's options; ``run --help`` without ``--method`` shows the
shared ones and lists the methods.
"""

from __future__ import annotations

import argparse
from typing import Any

from controller.cli.parser import Parser
from controller.experiment.methods.ina.method import InaMethod
from controller.experiment.methods.ina.networks import NETWORKS, refuse_network
from controller.experiment.registry import DEFAULT_METHOD, METHODS
from controller.experiment.run_options import (
    MAX_HIDDEN,
    MAX_REPEATS,
    MAX_ROUNDS,
    MAX_WINDOW,
    add_shared_options,
    add_switch_process_option,
    apply_switch_processes,
)
from controller.experiment.runner import execute

__all__ = ["add_run_parser", "cmd_run", "run_parser", "parse_run", "MAX_ROUNDS", "MAX_HIDDEN",
           "MAX_REPEATS", "MAX_WINDOW"]

HELP = ("run a synchronization experiment over Mininet (root; default: INA), or in "
        "virtual time (--network simulated)")


# the example line of ``run --help`` and of ``run --method X --help`` (docs/methods.md)
RUN_EXAMPLES = {
    None: "python -m controller run --rounds 10 --bw 1 --name first-run",
    "ina": "python -m controller run --workers 4 --rounds 10 --loss 0.02",
    "bcube": "python -m controller run --method bcube --bcube 4,2 --grad-mb 1,4 --bw 20 "
             "--rounds 3",
    "ps": "python -m controller run --method ps --bcube 4,2 --grad-mb 1 --bw 20 --rounds 3",
    "ring": "python -m controller run --method ring --bcube 4,2 --grad-mb 1 --bw 20 --rounds 3",
    "async": "python -m controller run --method async --workers 8 --rounds 40 "
             "--policies async,sigma,kappa",
    "ndn": "python -m controller run --method ndn --topo fattree:4 --ps h0 --ndn-sweep 4,8 "
           "--rounds 10 --bw 100",
    "cluster": "python -m controller run --method cluster --topo leafspine:2,1,5 --ps h0 "
               "--bw 100 --rounds 60",
    "ddp": "python -m controller run --method ddp --rounds 100",
}


def _methods_help() -> str:
    """One line per method class: its names and what it runs."""
    return "\n".join(f"  {cls.help}" for cls in dict.fromkeys(METHODS.values()))


def run_parser(prog: str, method: str | None) -> Parser:
    """The ``run`` options for ``method``: the shared ones and its own; None: the shared ones
    and the list of methods (what ``run --help`` shows)."""
    example = RUN_EXAMPLES.get(method, RUN_EXAMPLES[None])
    methods = (f"methods (`run --method X --help` shows X's options):\n{_methods_help()}\n\n"
               if method is None else "")
    p = Parser(prog=prog, description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog=f"{methods}example:\n  {example}")
    p.set_defaults(func=cmd_run)
    p.add_argument("--method", choices=sorted(METHODS), default=DEFAULT_METHOD,
                   help=f"the synchronization method (default {DEFAULT_METHOD})")
    p.add_argument("--network", choices=list(NETWORKS), default=None,
                   help="where the run deploys and launches: "
                        + "; ".join(f"{n}: {c.help}" for n, c in NETWORKS.items())
                        + " (default: servers with --servers, else mininet; "
                          "docs/running.md)")
    add_shared_options(p)
    add_switch_process_option(p)  # Mininet's pyswitch switches (topo.switch_groups)
    if method is not None:
        METHODS[method].add_arguments(p)
    return p


def parse_run(prog: str, argv: list[str], namespace: argparse.Namespace | None
              ) -> tuple[argparse.Namespace, list[str]]:
    """Parse ``run``'s arguments with the options of the ``--method`` they name."""
    # --method (or an abbreviation: --meth X) and --help, before X's options are known
    first = Parser(prog=prog, add_help=False)
    first.add_argument("--method", choices=sorted(METHODS), default=None)
    first.add_argument("-h", "--help", action="store_true")
    known, _ = first.parse_known_args(argv)
    if known.method is None and known.help:
        run_parser(prog, None).print_help()
        raise SystemExit(0)
    method = known.method or DEFAULT_METHOD
    args, rest = run_parser(prog, method).parse_known_args(argv, argparse.Namespace())
    if args.method != method:  # named by an abbreviation (--meth X): X's options, again
        method = args.method
        args, rest = run_parser(prog, method).parse_known_args(argv, argparse.Namespace())
    if rest:
        run_parser(prog, method).error(
            f"unrecognized arguments: {' '.join(rest)} (not options of --method {method}; "
            f"`run --method {method} --help` lists them)")
    if namespace is not None:
        for key, value in vars(args).items():
            setattr(namespace, key, value)
        args = namespace
    return args, []


def add_run_parser(sub: Any, add_subcommand: Any) -> None:
    """Register ``run``; its arguments are parsed by :func:`parse_run`."""
    p = add_subcommand(sub, "run", cmd_run, HELP)
    p.parse_with = lambda argv, namespace: parse_run(p.prog, argv, namespace)


def cmd_run(args: argparse.Namespace) -> int:
    """Build the method (which checks its options) and run it."""
    if METHODS[args.method] is not InaMethod:  # only INA's hosts run through the driver
        refuse_network(args.method, getattr(args, "network", None))
    apply_switch_processes(args)  # --switches-per-process: what every PySwitch reads
    execute(METHODS[args.method](args), argv=getattr(args, "command_line", None))
    return 0
