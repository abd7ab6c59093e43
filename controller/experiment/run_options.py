"""The options of ``python -m controller run``: the ones every method shares, the groups several
methods declare, and the one check of each.

``run`` parses ``--method`` first and then builds its parser from :func:`add_shared_options`
and that method's :meth:`~controller.experiment.runner.Method.add_arguments`
(:mod:`controller.cli.run`), so ``run --method X --help`` shows X's options and a method never
receives another's options or defaults.  Options that some methods share with the same meaning
are declared here once, as groups a method adds: the topology (``--topo/--ps/--workers``), the
impairments (``--loss/--dup/--reorder``), the INA transport (``--budget/--window/--timeout/
--slots``) and ``--round-timeout``.  :func:`check_options` checks every one of them, once, for
whichever method holds it (:class:`~controller.experiment.runner.Method` calls it when built).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from controller.errors import ExperimentError
from controller.experiment.network import SlotsOption, add_target_option
from controller.options import finite_float, int_option
from workers.models.shapes import WORKLOADS

__all__ = ["MAX_ROUNDS", "MAX_HIDDEN", "MAX_REPEATS", "MAX_WINDOW", "SHARED_DEFAULTS",
           "add_shared_options", "add_topology_options", "add_impairment_options",
           "add_transport_options", "add_round_timeout", "check_options", "check_out",
           "add_switch_process_option", "apply_switch_processes"]

# Sizes refused before anything starts: a typo (an extra zero or three) must not turn into a
# multi-gigabyte model or a run that cannot end in a day.
MAX_ROUNDS = 1_000_000
MAX_HIDDEN = 100_000  # 64·H + 10·H parameters per model copy (7.4 M at the limit)
MAX_REPEATS = 1_000
MAX_WINDOW = 65_536

# The defaults of the shared options.  They are the testbed's (``make run`` is the INA experiment
# on them, and ina.core.Settings repeats them for callers that build settings by hand; a test
# keeps the two equal); a method with other needs declares its own option instead.
SHARED_DEFAULTS = {"rounds": 30, "model": "mlp", "hidden": 32, "bw": 1.0, "seed": 0,
                   "repeats": 1, "target": "pyswitch", "out": "results", "name": ""}


def add_shared_options(p: argparse.ArgumentParser) -> None:
    """The options every method reads: rounds, model, links, seeds, switches, results folder."""
    d = SHARED_DEFAULTS
    p.add_argument("--rounds", type=int_option(1, MAX_ROUNDS), default=d["rounds"],
                   help=f"training rounds per mode (default {d['rounds']})")
    p.add_argument("--model", choices=["mlp", "logreg", *WORKLOADS], default=d["model"],
                   help="mlp/logreg: numpy models trained on digits; "
                        f"{'/'.join(WORKLOADS)}: a real model's gradients, scaled "
                        "(--method ina or ddp with --scale; docs/models.md)")
    p.add_argument("--hidden", type=int_option(1, MAX_HIDDEN), default=d["hidden"],
                   help="MLP hidden units (sets the gradient size)")
    p.add_argument("--bw", type=finite_float, default=d["bw"],
                   help=f"link bandwidth in Mbit/s (TCLink; default {d['bw']:g}; 0 = unshaped)")
    p.add_argument("--seed", type=int_option(0), default=d["seed"])
    p.add_argument("--repeats", type=int_option(1, MAX_REPEATS), default=d["repeats"],
                   metavar="N", help="run every mode N times, seeds --seed .. --seed+N-1, and "
                                     "report mean±std (default 1)")
    add_target_option(p, d["target"])
    p.add_argument("--out", default=d["out"], help="results folder")
    p.add_argument("--name", default=d["name"], help="run name (default: a timestamp)")


def add_topology_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, *, topo: str,
                         ps: str, workers: str | None) -> None:
    """``--topo``, ``--ps`` and (unless ``workers`` is None) ``--workers``, with the method's
    defaults; the method's graph is built from ``--topo`` and ``--bw`` by the base class."""
    p.add_argument("--topo", default=topo, help=f"topology spec (default {topo})")
    p.add_argument("--ps", default=ps, help=f"parameter server host (default {ps})")
    if workers is not None:
        p.add_argument("--workers", default=workers,
                       help=f"NAME,NAME,..., a COUNT or all (default {workers})")


def add_impairment_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--loss``, ``--dup``, ``--reorder``: probabilities on every switch port."""
    p.add_argument("--loss", type=finite_float, default=0.0,
                   help="drop probability on every port")
    p.add_argument("--dup", type=finite_float, default=0.0, help="duplication probability")
    p.add_argument("--reorder", type=finite_float, default=0.0, help="reordering probability")


def add_transport_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                          budget: int, window: int, timeout: float,
                          window_help: str | None = None,
                          timeout_help: str | None = None) -> None:
    """The INA transport and plan (INA and DDP): ``--budget``, ``--window``, ``--timeout``,
    ``--slots``.  ``--window`` is None when not given (the method's default then:
    ``window``, or what ``window_help`` says); ``timeout_help`` adds what the method does
    with ``--timeout``."""
    p.add_argument("--budget", type=int_option(0), default=budget,
                   help=f"programmable switches (M; default {budget})")
    p.add_argument("--window", type=int_option(1, MAX_WINDOW), default=None, metavar="N",
                   help=f"chunks in flight per worker (default {window_help or window})")
    p.add_argument("--timeout", type=finite_float, default=timeout,
                   help=f"first retransmission timeout (s; default {timeout:g}"
                        f"{'; ' + timeout_help if timeout_help else ''})")
    p.add_argument("--slots", type=int, action=SlotsOption, default=None, metavar="N",
                   help="aggregator slots per switch (compiles ina.p4 with -D INA_NUM_SLOTS=N; "
                        "default: constants.p4's; docs/protocol.md §2)")


def add_round_timeout(p: argparse.ArgumentParser | argparse._ArgumentGroup,
                      default: float = 120.0) -> None:
    """``--round-timeout``: how long one round may take before the run gives up."""
    p.add_argument("--round-timeout", type=finite_float, default=default,
                   help=f"seconds one round may take (default {default:g})")


def check_out(out: str, name: str) -> None:
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


def check_options(args: argparse.Namespace) -> None:
    """Every shared or grouped option the namespace holds, checked once (one ExperimentError
    naming the option).  One it lacks -- a method without it, or a namespace built by hand --
    is skipped; argparse's types have already refused words, ``inf`` and ``nan``."""
    def given(name: str) -> bool:
        return getattr(args, name, None) is not None

    for what, name in (("--rounds", "rounds"), ("--repeats", "repeats"), ("--window", "window")):
        if given(name) and getattr(args, name) < 1:
            raise ExperimentError(f"{what} must be >= 1, got {getattr(args, name)}")
    if given("bw") and args.bw < 0:
        raise ExperimentError(f"--bw must be >= 0 Mbit/s, got {args.bw}")
    for what, name in (("--loss", "loss"), ("--dup", "dup"), ("--reorder", "reorder")):
        if given(name) and not 0 <= getattr(args, name) < 1:
            raise ExperimentError(f"{what} must be in [0, 1), got {getattr(args, name)}")
    for what, name in (("--timeout", "timeout"), ("--round-timeout", "round_timeout")):
        if given(name) and not getattr(args, name) > 0:
            raise ExperimentError(f"{what} must be > 0 seconds, got {getattr(args, name)}")
    if given("model") and args.model in WORKLOADS and not hasattr(args, "scale"):
        raise ExperimentError(f"--model {args.model}: a real model's scaled emulation runs "
                              "with --method ina or --method ddp (docs/models.md)")
    if given("out") and given("name"):
        check_out(args.out, args.name)


# -- pyswitch switches per process (topo.switch_groups; docs/scale.md, "Switches per process")

def add_switch_process_option(p: argparse.ArgumentParser) -> None:
    """``--switches-per-process N|auto``: how many pyswitch switches one process runs."""
    p.add_argument("--switches-per-process", default=None, metavar="N|auto",
                   help="Mininet's pyswitch switches per process (pyswitch run-many): a count "
                        "or auto (default: PYSWITCH_PER_PROCESS, else auto: one process per switch "
                        "up to 32 switches, else one per core; a switch killed by the fault "
                        "injection: 1)")


def apply_switch_processes(args: argparse.Namespace) -> None:
    """``--switches-per-process`` into ``PYSWITCH_PER_PROCESS``, which every PySwitch of the
    run reads (topo.mininet_switch); ``--fail-switch`` kills one switch's process, so it runs
    one switch per process (an explicit count above 1 with it is an error)."""
    from topo.switch_groups import ENV, parse_per_process

    text = getattr(args, "switches_per_process", None)
    try:
        setting = parse_per_process(text) if text is not None else None
    except ValueError as exc:
        raise ExperimentError(f"--switches-per-process: {exc}") from None
    if getattr(args, "fail_switch", None):
        if setting not in (None, 1, "auto"):
            raise ExperimentError("--fail-switch kills one switch's process: it needs "
                                  "--switches-per-process 1")
        setting = 1
    if setting is not None:
        os.environ[ENV] = str(setting)

