"""``python -m controller compare RUN...``: finished runs of any method side by side
(docs/design.md §8).

Every ``run --method`` writes ``results/<run>/results.json``.  ``compare`` does not read
them by their shape: each method declares a typed results row beside its runner (an INA mode,
an async policy over its seeds, a cluster rule, an NDN worker count, a BCube schedule and
size, a DDP mode; :mod:`controller.experiment.rows`), found by the document's ``method`` in
:data:`controller.experiment.registry.ROWS`, and that class reads the rows and the run's
settings.  Runs with per-round records (``time_s``, ``ps_rx_bytes``, ``busiest_link_bytes``,
``retransmissions``, ``accuracy``, ``exact``) give one row per mode, their mean over the
rounds; the row classes' docstrings say what the others' rows mean.

Columns: the settings that differ between the runs shown (budget, planner, window, timeout,
jobs, loss, network, workers, rounds, link rate, model -- each run's full settings are also
listed under the table, since a time means nothing without them; a ``--jobs`` run counts the
jobs' workers, a ``simulate --no-train`` run names no model); seconds per round; goodput
(synchronized gradient bytes per second, where the run records the gradient size); bytes per
round into the PS host and on the busiest link; retransmissions; final accuracy; exactness;
and the LP's predicted vs measured γ where the run has one (INA; with ``--jobs`` one row per
job and mode, ``<job>/<mode>`` and ``alone/<job>``, each INA row with its own job's γ).
Figures are shown to three significant digits (a PS-only goodput of 0.0043 MB/s is not 0.00).

A results file that cannot be read or does not have that shape (not a regular file of at
most :data:`MAX_RESULTS_BYTES`, not JSON, not an object, a key of the wrong type -- every
field a row reads is checked: ``exact`` and ``matches_simulation`` true/false, not the
string "false"; ``settings.rounds`` a whole number >= 1; times, byte counts and γ >= 0;
retransmissions whole numbers >= 0; accuracies in [0, 1] --, a
number that is not finite, nesting where a number belongs, figures whose mean or quotient
overflows) is skipped with one line naming the file and the offending key; the table of the other runs is
still printed, and only when no run is left does ``compare`` exit non-zero.  ``--out`` must
not be one of the results files read (nothing is written then).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller.errors import ExperimentError
from controller.experiment.records import ModeSummary
from controller.experiment.rows import SETTING_COLUMNS, MethodRow, RunSettings
from controller.files import (
    InputFileError,
    OutputPathError,
    check_output_file,
    non_finite,
    read_input_text,
    shown_path,
    write_json_atomic,
)

__all__ = ["Row", "load_results", "rows_of", "run_settings", "compare_rows", "compare_runs",
           "settings_text", "differing_settings", "row_class"]

Row = ModeSummary  # one mode (or async policy, or cluster rule) of one run

MAX_RESULTS_BYTES = 512 * 2**20
"""Largest results.json read (a 1,000-round run with every record is a few MB)."""


def results_path(path: str | Path) -> Path:
    """The ``results.json`` a RUN argument names (the file, or the one in its run folder)."""
    p = Path(path)
    return p / "results.json" if p.is_dir() else p


def check_out_not_input(out: str | Path, runs: list[str]) -> None:
    """One ExperimentError if ``--out`` is one of the results files read (``compare RUN
    --out RUN/results.json`` would replace the run's results with the comparison)."""
    for run in runs:
        try:
            src = results_path(run)
            same = (src.exists() and Path(out).exists() and Path(out).samefile(src)) or (
                Path(out).resolve() == src.resolve())
        except (OSError, RuntimeError):  # a name the OS cannot look up: load_results says so
            continue
        if same:
            raise ExperimentError(f"--out {out}: is the results file of {run}, an input; "
                                  "nothing written")


def load_results(path: str | Path) -> dict[str, Any]:
    """``results.json`` of a run (``path`` is the file or its run folder)."""
    try:
        p = results_path(path)
        if not p.exists():
            raise ExperimentError(f"{shown_path(path)}: no results.json there")
    except OSError as exc:  # a name the OS cannot look up (too long)
        raise ExperimentError(f"{shown_path(path)}: {exc.strerror or exc}") from None
    try:  # a regular file of bounded size: a FIFO gives one line, never a hang
        doc = json.loads(read_input_text(p, MAX_RESULTS_BYTES, "results file"))
    except InputFileError as exc:
        raise ExperimentError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ExperimentError(f"{p}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise ExperimentError(f"{p}: not usable JSON: {exc}".split("; use")[0]) from None
    except RecursionError:
        raise ExperimentError(f"{p}: JSON nested too deeply") from None
    if not isinstance(doc, dict) or not any(k in doc for k in ("modes", "policies", "rules")):
        raise ExperimentError(f"{p}: not an INSync results file (no 'modes', 'policies' or "
                              "'rules')")
    problem = check_results(doc)
    if problem:
        raise ExperimentError(f"{p}: {problem}")
    return doc


# -- the shape rows_of reads (one message naming the first key that does not fit) ----------

class _Bad(Exception):
    pass


def _number(v: Any, where: str) -> None:
    """``None`` or a finite number (not a bool, which JSON's true would be)."""
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Bad(f"{where} must be a number, not {_kind(v)}")
    try:
        ok = math.isfinite(float(v))
    except OverflowError:
        ok = False
    if not ok:
        raise _Bad(f"{where} is not a finite number of usable size")


def _obj(v: Any, where: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Bad(f"{where} must be an object, not {_kind(v)}")
    return v


def _records(v: Any, where: str) -> list[dict[str, Any]]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Bad(f"{where} must be a list, not {_kind(v)}")
    for i, r in enumerate(v):
        _obj(r, f"{where}[{i}]")
        if r is None:
            raise _Bad(f"{where}[{i}] must be an object, not null")
    return v


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false"}.get(
        type(v), "null" if v is None else type(v).__name__)


def _bool(v: Any, where: str) -> None:
    """Absent or JSON's true/false (a string "false" must not count as exact)."""
    if v is not None and not isinstance(v, bool):
        raise _Bad(f"{where} must be true or false, not {_kind(v)} {_short(v)}")


def _text(v: Any, where: str) -> None:
    if v is not None and not isinstance(v, str):
        raise _Bad(f"{where} must be a string, not {_kind(v)}")


def _whole(v: Any, where: str, low: int) -> None:
    """Absent or a whole number >= ``low`` (JSON's 3.0 counts)."""
    _number(v, where)
    if v is not None and (v != int(v) or v < low):
        raise _Bad(f"{where} must be a whole number >= {low}, not {_short(v)}")


def _fraction(v: Any, where: str) -> None:
    """Absent or a number in [0, 1] (an accuracy)."""
    _number(v, where)
    if v is not None and not 0 <= v <= 1:
        raise _Bad(f"{where} must be between 0 and 1, not {_short(v)}")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


_ROUND_NUMBERS = ("time_s", "ps_rx_bytes", "busiest_link_bytes", "retransmissions", "accuracy")
_BYTES = ("ps_rx_bytes", "busiest_link_bytes")  # and every other count: >= 0


def _round_record(r: dict[str, Any], where: str) -> None:
    for key in _ROUND_NUMBERS:
        _number(r.get(key), f"{where}.{key}")
    for key in ("time_s", *_BYTES):
        if r.get(key) is not None and r[key] < 0:
            raise _Bad(f"{where}.{key} must be >= 0, not {_short(r[key])}")
    _whole(r.get("retransmissions"), f"{where}.retransmissions", 0)
    _fraction(r.get("accuracy"), f"{where}.accuracy")
    _bool(r.get("exact"), f"{where}.exact")


def _settings(settings: dict[str, Any]) -> None:
    for key in ("grad_bytes", "bw", "bw_mbps"):
        _number(settings.get(key), f"settings.{key}")
    _whole(settings.get("rounds"), "settings.rounds", 1)
    for key in ("topo", "central_ps"):
        _text(settings.get(key), f"settings.{key}")
    for key in ("model", "loss"):
        if not isinstance(settings.get(key), (str, int, float, type(None))):
            raise _Bad(f"settings.{key} must be a string or number, not "
                       f"{_kind(settings[key])}")
    for key in ("learners", "workers", "servers", "nodes"):
        v = settings.get(key)
        if isinstance(v, list):
            if not all(isinstance(w, (str, int)) and not isinstance(w, bool) for w in v):
                raise _Bad(f"settings.{key} must list host names")
        elif not isinstance(v, (str, int, type(None))) or isinstance(v, bool):
            raise _Bad(f"settings.{key} must be a count, a string or a list, not {_kind(v)}")
    bc = settings.get("bcube")
    if bc and not (isinstance(bc, list) and len(bc) == 2
                   and all(isinstance(x, int) and not isinstance(x, bool) for x in bc)):
        raise _Bad("settings.bcube must be [N, K] (two whole numbers)")


def _gamma(v: Any, where: str) -> None:
    gamma = _obj(v, where)
    for key in ("predicted", "measured"):
        _number(gamma.get(key), f"{where}.{key}")
        if gamma.get(key) is not None and gamma[key] < 0:  # a rate
            raise _Bad(f"{where}.{key} must be >= 0, not {_short(gamma[key])}")


def check_results(doc: dict[str, Any]) -> str | None:
    """What in ``doc`` does not have the shape :func:`rows_of` reads, or ``None``: every
    field it reads has its type checked here (numbers finite, counts >= 0, ``exact`` and
    ``matches_simulation`` true/false, names strings)."""
    try:
        for key in ("run", "method"):
            _text(doc.get(key), f"'{key}'")
        _settings(_obj(doc.get("settings"), "'settings'"))
        _gamma(doc.get("gamma"), "'gamma'")
        for name, job in _obj(doc.get("jobs"), "'jobs'").items():
            _gamma(_obj(job, f"jobs.{name}").get("gamma"), f"jobs.{name}.gamma")
        for name, mode in _obj(doc.get("modes"), "'modes'").items():
            where = f"modes.{name}"
            mode = _obj(mode, where)
            for key in ("grad_bytes", "grad_values", "pushes", "duration_s",
                        "ps_link_bytes_total", "retransmissions", "final_accuracy",
                        "soft_sync"):
                _number(mode.get(key), f"{where}.{key}")
                if key != "final_accuracy" and mode.get(key) is not None and mode[key] < 0:
                    raise _Bad(f"{where}.{key} must be >= 0, not {_short(mode[key])}")
            _whole(mode.get("retransmissions"), f"{where}.retransmissions", 0)
            _fraction(mode.get("final_accuracy"), f"{where}.final_accuracy")
            if not isinstance(mode.get("policy"), (str, int, type(None))):
                raise _Bad(f"{where}.policy must be a string, not {_kind(mode['policy'])}")
            for i, r in enumerate(_records(mode.get("rounds"), f"{where}.rounds")):
                _round_record(r, f"{where}.rounds[{i}]")
        for name, data in _obj(doc.get("policies"), "'policies'").items():
            where = f"policies.{name}"
            for i, r in enumerate(_records(_obj(data, where).get("runs"), f"{where}.runs")):
                for key in ("duration_s", "ps_link_bytes", "final_accuracy"):
                    _number(r.get(key), f"{where}.runs[{i}].{key}")
                    if r.get(key) is not None and r[key] < 0:
                        raise _Bad(f"{where}.runs[{i}].{key} must be >= 0, not "
                                   f"{_short(r[key])}")
                _fraction(r.get("final_accuracy"), f"{where}.runs[{i}].final_accuracy")
        for name, data in _obj(doc.get("rules"), "'rules'").items():
            where = f"rules.{name}"
            for i, r in enumerate(_records(_obj(data, where).get("runs"), f"{where}.runs")):
                w = f"{where}.runs[{i}]"
                for key in ("busiest_link_bytes_per_round", "final_accuracy"):
                    _number(r.get(key), f"{w}.{key}")
                _fraction(r.get("final_accuracy"), f"{w}.final_accuracy")
                for k, v in _obj(r.get("link_bytes"), f"{w}.link_bytes").items():
                    _number(v, f"{w}.link_bytes.{k}")
                _bool(r.get("matches_simulation"), f"{w}.matches_simulation")
                for j, rr in enumerate(_records(r.get("rounds"), f"{w}.rounds")):
                    _number(rr.get("time_s"), f"{w}.rounds[{j}].time_s")
    except _Bad as exc:
        return str(exc)
    return None


def check_row(row: Row) -> str | None:
    """A figure of ``row`` that is not a finite number (inputs so large that their mean or
    quotient overflows), or ``None``: such a row would print ``inf`` and could not be
    written as standard JSON."""
    found = non_finite(asdict(row))
    return None if found is None else (f"mode {row.mode}: {found} is not a finite number "
                                       "(the recorded figures are too large)")


def row_class(doc: dict[str, Any]) -> type[MethodRow]:
    """The row class of the method that wrote ``doc`` (:data:`controller.experiment.registry.
    ROWS`; no ``method``: INA, as the first results files were)."""
    from controller.experiment.registry import ROWS

    method = str(doc.get("method") or "ina")
    if method not in ROWS:
        raise ExperimentError(f"method {method!r} is not one compare knows "
                              f"({', '.join(ROWS)})")
    return ROWS[method]


def rows_of(run: str, doc: dict[str, Any]) -> list[Row]:
    """The rows of one results document, read by its method's row class."""
    return list(row_class(doc).rows(run, doc))


def run_settings(doc: dict[str, Any]) -> RunSettings:
    """The settings of one results document, read by its method's row class."""
    return row_class(doc).run_settings(doc)


def settings_text(doc: dict[str, Any]) -> str:
    """The settings a row's figures depend on, in one line."""
    return run_settings(doc).text()


def differing_settings(settings: list[RunSettings]) -> list[str]:
    """The settings (:data:`~controller.experiment.rows.SETTING_COLUMNS`) whose value is not
    the same in every run: the columns that tell the compared runs apart."""
    if len(settings) < 2:
        return []
    return [name for name in SETTING_COLUMNS
            if len({getattr(s, name) for s in settings}) > 1]


def compare_rows(paths: list[str], skip: Callable[[str], None] | None = None,
                 ) -> tuple[list[Row], dict[str, str]]:
    """Rows of every run, and each run's settings line (run name -> text)."""
    rows, settings = compare_runs(paths, skip)
    return rows, {run: s.text() for run, s in settings.items()}


def compare_runs(paths: list[str], skip: Callable[[str], None] | None = None,
                 ) -> tuple[list[Row], dict[str, RunSettings]]:
    """Rows of every run, and each run's settings (run name -> :class:`RunSettings`).

    A run that cannot be used raises :class:`ExperimentError`, or with ``skip`` is reported
    through ``skip(message)`` and left out (the other runs are still compared)."""
    rows: list[Row] = []
    settings: dict[str, RunSettings] = {}
    for path in paths:
        try:
            doc = load_results(path)
            run = str(doc.get("run") or Path(path).name)
            if run in settings:
                run = f"{run} ({path})"
            try:  # check_results covers what the rows read; this is the backstop
                these, found = rows_of(run, doc), run_settings(doc)
                problem = next((p for p in map(check_row, these) if p), None)
                if problem:
                    raise ExperimentError(problem)
            except ExperimentError as exc:
                raise ExperimentError(f"{path}: {exc}") from None
            except (TypeError, ValueError, KeyError, AttributeError, IndexError,
                    OverflowError, ZeroDivisionError) as exc:
                raise ExperimentError(f"{path}: unexpected content "
                                      f"({type(exc).__name__}: {exc})") from None
        except ExperimentError as exc:
            if skip is None:
                raise
            skip(str(exc))
            continue
        rows.extend(these)
        settings[run] = found
    return rows, settings


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _sig(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits and never in exponent form down to 1e-6
    (a PS-only goodput of 0.0043 MB/s must not print as 0.00), thousands separated."""
    if x is None:
        return "-"
    if x == 0 or abs(x) >= 10 ** (digits - 1):
        return f"{x:,.0f}"
    places = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{min(places, 6 + digits)}f}"


def cmd_compare(args: Any) -> int:
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if args.out:  # before reading anything: a bad --out must not cost the table
        try:
            check_output_file(args.out, "--out")
        except OutputPathError as exc:
            raise ExperimentError(str(exc)) from None
        check_out_not_input(args.out, args.runs)

    def skip(message: str) -> None:
        print(f"error: {message} (skipped)", file=sys.stderr)

    rows, settings = compare_runs(args.runs, skip=skip)
    if not settings:  # every run was skipped, each with its line
        return 2
    index = {run: i + 1 for i, run in enumerate(settings)}  # short run labels for the table
    method = {r.run: r.method for r in rows}
    differ = differing_settings(list(settings.values()))  # columns that tell runs apart
    table = Table(title="INSync runs side by side (# = run, listed below; kB per round)",
                  box=box.SIMPLE_HEAD)
    for col in ("#", "mode", *differ, "rounds", "s/round", "MB/s", "PS kB", "max link kB",
                "retx", "accuracy", "exact", "γ LP/meas"):
        table.add_column(col, justify="left" if col in ("mode", *differ) else "right",
                         no_wrap=True)
    previous = None
    for r in rows:
        if previous is not None and r.run != previous:
            table.add_section()
        previous = r.run
        s = settings[r.run]
        table.add_row(
            str(index[r.run]), escape(r.mode),
            *(escape(getattr(s, name) or "-") for name in differ),
            str(r.rounds), _sig(r.s_per_round),
            _sig(None if r.goodput_Bps is None else r.goodput_Bps / 1e6),
            _sig(None if r.ps_bytes_per_round is None else r.ps_bytes_per_round / 1e3),
            _sig(None if r.busiest_bytes_per_round is None
                 else r.busiest_bytes_per_round / 1e3),
            "-" if r.retransmissions is None else str(r.retransmissions),
            _fmt(r.accuracy, ".3f"), "-" if r.exact is None else ("yes" if r.exact else "NO"),
            "-" if r.gamma_predicted is None else
            f"{_sig(r.gamma_predicted)}/{_sig(r.gamma_measured)}")
    console = Console()
    if not console.is_terminal:  # a file or a pipe: no reason to cut columns at 80
        console = Console(width=200)
    console.print(table)
    for run, s in settings.items():
        # names are the user's text, not rich markup ("[/bogus]" would raise MarkupError)
        console.print(escape(f"{index[run]}  {run} (--method {method.get(run, '?')}): "
                             f"{s.text()}"))
    if args.out:
        doc = {"runs": {run: s.text() for run, s in settings.items()},
               "settings": {run: asdict(s) for run, s in settings.items()},
               "differ": differ, "rows": [asdict(r) for r in rows]}
        found = non_finite(doc)  # compare_rows skipped such runs: this is the backstop
        if found is not None:
            raise ExperimentError(f"--out {args.out}: {found} is not a finite number; "
                                  "nothing written")
        write_json_atomic(Path(args.out), doc)
        console.print(escape(f"written: {args.out}"))
    return 0


def add_compare_parser(sub: Any, add_subcommand: Any) -> None:
    p = add_subcommand(sub, "compare", cmd_compare,
                       "put finished runs (results/<run>/results.json) side by side")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="a run folder or its results.json (any method)")
    p.add_argument("--out", default="", help="also write the rows as JSON to this file")
