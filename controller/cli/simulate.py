"""``python -m controller simulate``: a short alias of ``run --network simulated``
(docs/simulate.md): the one INA engine over the simulated network -- the same plan, rules,
job files, drivers of the worker and PS state machines, records, ``results.json`` (marked
``"simulated": true``), ``report.md`` and plots as ``run`` -- no Mininet and no root, with
the simulated network's options and a sweep: ``--budgets 1,2,4`` runs one simulation per
budget, each its own run folder ``<name>-b<M>``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.dataplane.deploy import SLOT_POLICIES
from controller.errors import ExperimentError
from controller.experiment.cross_traffic import add_cross_traffic_option, fairness_lines
from controller.experiment.methods.ina.core import Settings
from controller.experiment.methods.ina.options import add_network_options, settings_from_args
from controller.experiment.prediction import prediction_lines
from controller.experiment.run_name import claim_name, released_on_failure
from controller.experiment.run_options import add_shared_options, check_options
from controller.experiment.simulate.run import SimOptions, simulate
from controller.experiment.sweep_report import plot_sweep, sweep_markdown, sweep_row
from controller.files import write_json_atomic
from controller.options import finite_float, int_option
from controller.plan.options import add_plan_options
from workers.ina.job import MODES

__all__ = ["add_simulate_parser", "cmd_simulate"]

HELP = "run the INA experiment in virtual time (no Mininet; docs/simulate.md)"
MAX_BUDGETS = 64


def _budgets(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        msg = f"expected budgets like 1,2,4, got {text[:40]!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if not out or len(out) > MAX_BUDGETS or any(b < 0 for b in out):
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_BUDGETS} budgets >= 0, got "
                                         f"{text[:40]!r}")
    return out


def add_simulate_parser(sub: Any, add_subcommand: Any) -> None:
    """Register ``simulate`` with ``run``'s INA options that apply and its own."""
    p = add_subcommand(sub, "simulate", cmd_simulate, HELP)
    add_shared_options(p)
    _hide(p, "--repeats", "--target")  # refused in _check: the simulated network's limits
    g = add_network_options(p, "the INA job (as run --method ina)")
    d = Settings()
    # given or not: _check refuses them with --budgets/--jobs
    p.set_defaults(budget=None, ps=None, workers=None)
    add_plan_options(g, with_budget=False, with_seed=False)  # as plan (and run)
    g.add_argument("--modes", default=",".join(d.modes),
                   help=f"comma list of {', '.join(MODES)} (default {','.join(d.modes)})")
    g.add_argument("--jobs", metavar="FILE|N", default=None,
                   help="several jobs at once instead of --ps/--workers (as run --jobs)")
    g.add_argument("--slot-policy", choices=SLOT_POLICIES, default=d.slot_policy,
                   help="with --jobs: how jobs share each switch's slots (as run)")
    add_cross_traffic_option(g)
    o = SimOptions()
    v = p.add_argument_group("virtual time (docs/simulate.md)")
    v.add_argument("--budgets", type=_budgets, default=None, metavar="M,M,...",
                   help="one simulation per budget (instead of --budget), folders <name>-b<M>")
    v.add_argument("--delay-ms", type=finite_float, default=o.delay_ms,
                   help=f"propagation delay per link (default {o.delay_ms:g}, as Mininet's)")
    v.add_argument("--queue", type=int_option(1), default=o.queue,
                   help=f"frames a link direction queues, drop-tail (default {o.queue})")
    # dest apart from run's --compute-ms (a real model's step time, ina.options.check_workload)
    v.add_argument("--compute-ms", dest="sim_compute_ms", type=finite_float,
                   default=o.compute_ms,
                   help=f"a worker's time between two rounds (default {o.compute_ms:g})")
    v.add_argument("--jitter-ms", type=finite_float, default=o.jitter_ms,
                   help="plus uniform [0, J) per worker and round, seeded "
                        f"(default {o.jitter_ms:g}: the start-file poll)")
    v.add_argument("--switch-proc-ms", type=finite_float, default=o.switch_proc_ms,
                   help=f"a switch's time per frame (default {o.switch_proc_ms:g})")
    v.add_argument("--burst-bytes", type=finite_float, default=o.burst_bytes,
                   help="a token bucket of this many bytes per link direction, as htb shapes "
                        f"(default {o.burst_bytes:g}: TCLink's class's ceil bucket; 0: every "
                        "frame takes its transmission time)")
    v.add_argument("--wake-ms", type=finite_float, default=o.wake_ms,
                   help="every switch and host takes a frame this long after it arrives "
                        "(Mininet's processes woken on shared cores; default "
                        f"{o.wake_ms:g}; docs/simulate.md)")
    v.add_argument("--ecn-packets", type=int, default=o.ecn_packets, metavar="N",
                   help="switches mark INA packets whose link queue holds N frames "
                        "(MyEgress.ecn_config; default 0: no marks; docs/protocol.md §6)")
    v.add_argument("--no-train", action="store_true",
                   help="seeded random int32 gradients instead of training the model "
                        "(faster at scale; sums still checked exactly)")
    v.add_argument("--full-p4", action="store_true",
                   help="every switch executes ina.p4 (default: a switch that never "
                        "aggregates forwards INA frames by its rules, tested equal)")


def _hide(p: argparse.ArgumentParser, *options: str) -> None:
    """Leave ``options`` out of ``--help``: the shared options simulate takes but refuses
    (``_check`` says why in one line)."""
    for a in p._actions:
        if any(o in a.option_strings for o in options):
            a.help = argparse.SUPPRESS


def _check(args: argparse.Namespace) -> None:
    # --budget/--ps/--workers default to None here, so that giving them is seen (parser above)
    if args.budgets is not None and args.budget is not None:
        raise ExperimentError(f"--budget {args.budget} with --budgets: give one of them "
                              "(--budgets 3 for one budget)")
    given = [o for o, v in (("--ps", args.ps), ("--workers", args.workers)) if v is not None]
    if args.jobs is not None and given:
        # as plan refuses them (--workers was ignored: --workers 64 --jobs 4 ran 4 jobs of 255)
        raise ExperimentError(f"{' and '.join(given)} with --jobs: --jobs names every job's "
                              "PS and workers (N: every host dealt out to N jobs); drop "
                              f"{' and '.join(given)} (bench/sim_scale.py --workers W "
                              "--jobs N: N jobs of W)")
    d = Settings()
    args.budget = d.budget if args.budget is None else args.budget
    args.ps = d.ps if args.ps is None else args.ps
    args.workers = d.workers if args.workers is None else args.workers
    check_options(args)
    if not args.bw:
        raise ExperimentError("--bw 0 (unshaped links): virtual time needs a link rate")
    if args.repeats != 1:
        raise ExperimentError("--repeats: run simulate once per --seed instead")
    if args.target != "pyswitch":
        raise ExperimentError("--target: simulate runs ina.p4 on in-process pyswitch only")
    for what, v in (("--delay-ms", args.delay_ms), ("--compute-ms", args.sim_compute_ms),
                    ("--jitter-ms", args.jitter_ms), ("--switch-proc-ms", args.switch_proc_ms),
                    ("--wake-ms", args.wake_ms)):
        if not 0 <= v <= 60_000:
            raise ExperimentError(f"{what} must be in [0, 60000] ms, got {v:g}")
    if not 0 <= args.ecn_packets <= 1 << 19:
        raise ExperimentError(f"--ecn-packets must be in [0, 2^19], got {args.ecn_packets}")
    if not 0 <= args.burst_bytes <= 1 << 30:
        raise ExperimentError(f"--burst-bytes must be in [0, 2^30], got {args.burst_bytes:g}")


def cmd_simulate(args: argparse.Namespace) -> int:
    """Simulate one run per budget; write each ``results.json``; print one line per mode."""
    _check(args)
    s = settings_from_args(args)
    opt = SimOptions(delay_ms=args.delay_ms, queue=args.queue, compute_ms=args.sim_compute_ms,
                     jitter_ms=args.jitter_ms, switch_proc_ms=args.switch_proc_ms,
                     train=not args.no_train, full_p4=args.full_p4,
                     burst_bytes=args.burst_bytes, ecn_packets=args.ecn_packets,
                     wake_ms=args.wake_ms)
    budgets = args.budgets if args.budgets is not None else [s.budget]
    suffixes = [""] if args.budgets is None else [f"-b{b}" for b in budgets]
    claim = None
    if not args.name:  # the time to the second: two runs started together get two names
        claim = claim_name(Path(args.out), time.strftime("sim-%Y%m%d-%H%M%S"), suffixes)
    name = claim.name if claim is not None else args.name
    sweep = []
    with released_on_failure(claim):  # a bad option found late leaves no empty folder
        for b, suffix in zip(budgets, suffixes, strict=True):
            sb = replace(s, budget=b, extra=dict(s.extra))
            run_name = f"{name}{suffix}"
            out_dir = Path(args.out) / run_name
            doc, stats = simulate(sb, opt, out_dir, run_name)
            doc["complete"] = True
            doc["command"] = getattr(args, "command_line", None)
            write_json_atomic(out_dir / "results.json", doc)
            sweep.append(sweep_row(b, run_name, doc))
            _print(doc, stats, out_dir)
    if args.budgets is not None:  # the sweep's summary: γ predicted and measured per budget
        path = Path(args.out) / f"{name}-sweep.json"
        write_json_atomic(path, {"runs": sweep, "settings": {
            k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, type(None)))
            and k not in ("func", "command_line")}})
        print(f"sweep over budgets {','.join(map(str, budgets))}:")
        for r in sweep:
            ratio = "—" if r["ratio"] is None else f"{r['ratio']:.3f}"
            links = (f", links within 10 % of the LP {r['links_within']}/{r['links_loaded']}"
                     if r.get("links_loaded") else "")
            print(f"  budget {r['budget']}: γ predicted {r['predicted']:.4g}, measured "
                  f"{r['measured'] or 0:.4g}, ratio {ratio}{links}, exact "
                  f"{'yes' if r['exact'] else 'NO'} ({r['run']})")
        settings = {k: v for k, v in vars(args).items()
                    if isinstance(v, (int, float, str, type(None)))}
        figure = plot_sweep(sweep, Path(args.out) / f"{name}-sweep.png")
        md = Path(args.out) / f"{name}-sweep.md"
        md.write_text(sweep_markdown(name, sweep, settings,
                                     figure.name if figure is not None else None))
        print(f"  {path}, {md}" + (f", {figure}" if figure is not None else ""))
    return 0


def _print(doc: dict[str, Any], stats: Any, out_dir: Path) -> None:
    s = doc["settings"]
    if "jobs" in doc:  # several jobs
        print(f"simulated {s['topo']}, {len(doc['jobs'])} jobs, budget {s['budget']}, "
              f"{s['bw']:g} Mbit/s, loss {s['loss']:g}, {s['rounds']} rounds; fairness "
              f"{doc['fairness'] if doc['fairness'] is None else round(doc['fairness'], 3)}")
        for job, j in doc["jobs"].items():
            g = j["gamma"]
            per_mode = ", ".join(f"{m} {t:.4f}" if t is not None else f"{m} —"
                                 for m, t in j["time_per_round_s"].items())
            print(f"  {job}: {len(j['workers'])} workers, γ predicted {g['predicted']:.4g}, "
                  f"measured {g['measured'] or 0:.4g}, s/round {per_mode}, "
                  f"exact {'yes' if j['exact_all_rounds'] else 'NO'}")
        for line in prediction_lines(doc) + fairness_lines(doc):
            print(f"  {line}")
        print(f"  {stats.wall_s:.1f} s on this machine, {stats.events:,} events "
              f"({stats.events_per_s:,.0f}/s), peak RSS {stats.peak_mib:.0f} MiB; "
              f"{out_dir / 'results.json'}")
        return
    g = doc["gamma"]
    print(f"simulated {s['topo']}, PS {s['ps']}, {len(doc['plan']['workers'])} workers, "
          f"budget {s['budget']} ({s['planner']}), {s['bw']:g} Mbit/s, loss {s['loss']:g}, "
          f"{s['rounds']} rounds: γ predicted {g['predicted']:.4g}, measured "
          f"{g['measured']:.4g} (ratio {g['ratio']:.3f})")
    for mode, rec in doc["modes"].items():
        rs = rec["rounds"]
        print(f"  {mode:8} {sum(r['time_s'] for r in rs) / len(rs):.4f} s/round, PS "
              f"{rs[0]['ps_rx_bytes']:,.1f} B/round, retx "
              f"{sum(r['retransmissions'] for r in rs)}, exact "
              f"{'yes' if all(r['exact'] for r in rs) else 'NO'}")
    for line in prediction_lines(doc) + fairness_lines(doc):
        print(f"  {line}")
    print(f"  {stats.wall_s:.1f} s on this machine (plan {stats.plan_s:.1f} s), "
          f"{stats.events:,} events ({stats.events_per_s:,.0f}/s), peak RSS "
          f"{stats.peak_mib:.0f} MiB; {out_dir / 'results.json'}")
