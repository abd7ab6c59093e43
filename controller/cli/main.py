"""``python -m controller``: the controller's command line.

Subcommands are registered in :func:`build_parser`; each has its own function (``plan`` here;
others, e.g. ``deploy``, add theirs with :func:`add_subcommand`).  User mistakes print one line
``error: ...`` on stderr and exit with code 2; nothing is written then (the plan is written
atomically, after everything succeeded).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from controller.cli.network import add_network_parsers
from controller.cli.parser import Parser, UsageError
from controller.cli.run import add_run_parser
from controller.cli.simulate import add_simulate_parser
from controller.errors import ExperimentError
from controller.experiment.campaign import add_campaign_parser
from controller.experiment.clean import add_clean_parser
from controller.experiment.compare import add_compare_parser
from controller.experiment.network import shaped_graph
from controller.experiment.plan_figure import draw_plan, plan_picture_path
from controller.files import InputFileError, OutputPathError, check_output_file
from controller.options import finite_float, int_option, read_topology
from controller.plan.document import resolve_workers, write_plan
from controller.plan.jobs import jobs_argument
from controller.plan.joint import jobs_summary_lines
from controller.plan.lp import PlanError
from controller.plan.options import add_plan_options, request_from_args
from controller.plan.pipeline import make_plan
from controller.plan.types import Plan
from topo.models import TopologyError

__all__ = ["main", "build_parser", "add_subcommand", "cmd_plan", "resolve_workers",
           "UsageError"]

EXIT_USAGE = 2

# the example line every subcommand's --help ends with (``run``'s: controller.cli.run)
EXAMPLES = {
    "plan": "python -m controller plan --topo fattree:4 --ps h0 --workers 8 --budget 2 "
            "--out results/plan.json",
    "compare": "python -m controller compare results/run-a results/run-b --out compare.json",
    "net": "python -m controller net --topo fattree:4 --out results/network.json",
    "deploy": "python -m controller deploy --plan plan.json --network results/network.json",
    "clean": "python -m controller clean --dry-run",
    "campaign": "python -m controller campaign --faults loss,slots --seeds 3",
    "simulate": "python -m controller simulate --topo fattree:8 --workers 16 --budgets 0,2,4 "
                "--no-train",
}


def with_example(parser: argparse.ArgumentParser, example: str) -> None:
    """End ``parser``'s --help with ``example:`` and the line (kept as written)."""
    parser.epilog = (f"{parser.epilog}\n\n" if parser.epilog else "") + f"example:\n  {example}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


def cmd_plan(args: argparse.Namespace) -> int:
    """Compute a deployment plan and write it as JSON (:mod:`controller.plan.pipeline`)."""
    if args.budgets is None and args.budget is None:
        raise PlanError("give --budget M (or --budgets B,B,... for a sweep)")
    if args.budgets is not None and args.budget is not None:
        raise PlanError("--budget and --budgets: give one")
    if args.budgets is None and args.planners is not None:
        raise PlanError("--planners goes with --budgets (a sweep); one plan takes --planner")
    if args.budgets is not None:
        args.budget = 0  # the request's other settings; the sweep's budgets are its own
    req = request_from_args(args, spec=args.topo if not args.topo.endswith(".json") else None)
    req.check()
    # the output path first: an unwritable --out must not be found only after the LP
    check_output_file(args.out, "--out")
    if args.jobs is not None:
        if args.ps is not None or args.workers is not None:
            raise PlanError("--jobs names every job's PS and workers: drop --ps and --workers")
    elif args.ps is None or args.workers is None:
        raise PlanError("give --ps and --workers (one job), or --jobs FILE|N (several)")
    graph = read_topology(args.topo)
    if args.bw is not None:
        if not args.bw > 0:
            raise PlanError(f"--bw must be > 0 Mbit/s, got {args.bw}")
        graph = shaped_graph(graph, args.bw)
    if args.budgets is not None:
        from controller.cli.plan_sweep import run_sweep

        if args.jobs is not None:
            return run_sweep(args, req, graph, jobs=jobs_argument(args.jobs, graph))
        return run_sweep(args, req, graph, ps=args.ps,
                         workers=resolve_workers(graph, args.ps, args.workers))
    if args.jobs is not None:
        plan = make_plan(graph, req, jobs=jobs_argument(args.jobs, graph))
    else:
        plan = make_plan(graph, req, ps=args.ps,
                         workers=resolve_workers(graph, args.ps, args.workers))
    try:
        write_plan(plan, args.out)
    except OSError as exc:  # e.g. the disk filled up during the LP (nothing is left behind)
        raise PlanError(f"--out {args.out}: cannot write the plan "
                        f"({exc.strerror or exc})") from None
    picture = plan_picture_path(args.out)
    try:
        draw_plan(plan, picture, graph)
    except OSError as exc:
        raise PlanError(f"--out {args.out}: cannot write the picture {picture} "
                        f"({exc.strerror or exc})") from None
    if plan.warning:  # a baseline beat the planner, or the budget went unused (one line)
        print(plan.warning, file=sys.stderr)
    if args.jobs is not None:
        for line in jobs_summary_lines(plan):
            print(line)
        print(f"{plan.planner} {plan.timings['greedy']:.2f}s; plan written to {args.out}, "
              f"its picture to {picture}")
    else:
        _summary(plan, args)
    return 0


def _summary(plan: Plan, args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    job = plan.job
    t = Table(title=f"INA plan — {args.topo}, PS {job.ps} (ToR {job.ps_tor}), "
                    f"{len(job.workers)} workers, budget {plan.budget}")
    t.add_column("method")
    t.add_column("γ", justify="right")
    t.add_column("× PS-only", justify="right")
    t.add_column("switches")
    ps = plan.baselines.get("ps_only")
    rows = [(f"{plan.planner} (plan)", job.gamma, plan.deployed, "")]
    for name, d in plan.baseline_details.items():
        rows.append((name, d["gamma"], d.get("deployed", []), d.get("note", "")))
    for name, g, dep, note in rows:
        ratio = _fmt(g / ps) if (g is not None and ps) else "—"
        shown = ", ".join(dep[:8]) + (" …" if len(dep) > 8 else "")
        if g is None:
            shown = note
        t.add_row(name, _fmt(g), ratio, shown)
    con.print(t)
    con.print(f"deployed (interval order): {', '.join(plan.deployed) or '(none)'}; "
              f"PS link load {job.ps_link_load:.6g} (= γ); "
              f"{plan.planner} {plan.timings['greedy']:.2f}s, "
              f"{plan.timings['lp_solves']} LPs; plan written to {args.out}, "
              f"its picture to {plan_picture_path(args.out)}")


def add_subcommand(
    sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], int],
    help: str,
) -> argparse.ArgumentParser:
    """Register a subcommand; ``func(args) -> exit code``."""
    p = sub.add_parser(name, help=help, description=help)
    p.set_defaults(func=func)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m controller", description="INSync controller")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = add_subcommand(sub, "plan", cmd_plan,
                       "compute which switches aggregate and how workers route (greedy + LP)")
    p.add_argument("--topo", required=True,
                   help="fattree:K | leafspine:L,S,H | bcube:N,K | dumbbell:L,R[,B] | FILE.json")
    p.add_argument("--ps", help="the parameter server host (one job)")
    p.add_argument("--workers",
                   help="NAME,NAME,..., a COUNT (first COUNT hosts besides the PS) or all")
    p.add_argument("--jobs", metavar="FILE|N",
                   help="several jobs sharing the switches instead of --ps/--workers: a jobs "
                        "file (JSON list) or N (the hosts dealt out to N jobs; docs/design.md "
                        "§3.10)")
    p.add_argument("--budget", type=int_option(), default=None,  # < 0: PlanRequest.check's message
                   help="M: programmable switches besides the PS's ToR (or --budgets)")
    p.add_argument("--budgets", metavar="B,B,...",
                   help="a sweep instead of one plan: every budget × every --planners entry, "
                        "one table (stdout, JSON at --out) and one figure (γ against budget)")
    p.add_argument("--planners", metavar="NAME,...",
                   help="with --budgets: the planners to sweep (default: --planner)")
    add_plan_options(p, with_baselines=True, with_budget=False)  # --planner, ...
    p.add_argument("--bw", type=finite_float, default=None,
                   help="Mbit/s on every link, as run --bw sets them (default: the "
                        "topology's own, 1 where it names none -- run's default)")
    p.add_argument("--out", required=True, help="plan file to write (JSON)")
    add_run_parser(sub, add_subcommand)
    add_simulate_parser(sub, add_subcommand)
    add_compare_parser(sub, add_subcommand)
    add_network_parsers(sub, add_subcommand)
    add_clean_parser(sub, add_subcommand)
    add_campaign_parser(sub, add_subcommand)
    for name, example in EXAMPLES.items():
        if name in sub.choices:
            with_example(sub.choices[name], example)
    with_example(parser, "python -m controller plan --help; python -m controller run "
                         "--rounds 10")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        # provenance records the command as typed (or as a test passed it)
        args.command_line = ["python", "-m", "controller",
                             *(sys.argv[1:] if argv is None else argv)]
        return args.func(args)
    except (UsageError, PlanError, TopologyError, ExperimentError, OutputPathError,
            InputFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
