"""bench/soak.py's pure parts (issue 20 item 6): when it samples, what it reads from /proc,
how growth is judged, and how it finds the job's processes (the Mininet run itself is the
bench; a reduced one is validated by hand, see its docstring)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from soak import (  # noqa: E402
    METRICS,
    growth,
    node_role,
    parse_figures,
    proc_figures,
    sample_points,
    slope_per_round,
)

STATUS = "Name:\tpython\nVmRSS:\t  143212 kB\nRssAnon:\t   98600 kB\nThreads:\t3\n"
ROLLUP = ("00400000-7ffd [rollup]\nRss:  143212 kB\nPss:  101040 kB\n"
          "Private_Clean:  2000 kB\nPrivate_Dirty:  97000 kB\n")


def test_samples_after_warmup_in_between_and_before_the_last_round() -> None:
    assert sample_points(1000, 5, 10) == [4, 94, 185, 275, 365, 456, 546, 637, 727, 817,
                                          908, 998]
    assert sample_points(7, 5, 3) == [4, 5]  # too few rounds for more: no duplicates
    with pytest.raises(ValueError, match="warmup"):
        sample_points(6, 5, 1)


def test_figures_from_proc_status_and_smaps_rollup() -> None:
    f = parse_figures(STATUS, ROLLUP, 6)
    assert f == {"rss_kib": 143212, "rss_anon_kib": 98600, "pss_kib": 101040,
                 "uss_kib": 99000, "private_clean_kib": 2000, "private_dirty_kib": 97000,
                 "fds": 6, "threads": 3}
    assert parse_figures(STATUS, None, 6)["pss_kib"] is None  # kernel without smaps_rollup
    mine = proc_figures(os.getpid())
    assert mine["rss_kib"] > 0 and mine["fds"] > 0 and mine["threads"] >= 1


def test_growth_is_judged_on_rss_anonymous_rss_and_descriptors_only() -> None:
    a = {"rss_kib": 100, "rss_anon_kib": 50, "pss_kib": 80, "uss_kib": 60, "fds": 20,
         "threads": 3}
    pct, bad = growth(a, {**a, "rss_kib": 104, "pss_kib": 100, "uss_kib": 90}, 5.0)
    assert pct["rss_kib"] == pytest.approx(4.0) and bad == []  # PSS/USS shown, not judged
    _, bad = growth(a, {**a, "rss_anon_kib": 53, "fds": 21}, 5.0)
    assert bad == ["rss_anon_kib", "fds"] and METRICS == ("rss_kib", "rss_anon_kib", "fds")


def test_slope_is_kib_per_round() -> None:
    assert slope_per_round([(4, 1000), (104, 2939), (204, 4878)]) == pytest.approx(19.39)
    assert slope_per_round([(4, 1000)]) is None


def test_the_job_processes_are_found_by_module_job_file_and_worker_bit() -> None:
    job, workers = "/r/ina/job.json", ["h1", "h2"]
    py = "/venv/bin/python"
    assert node_role([py, "-m", "workers.ina.ps_node", job], job, workers) == ("ps", "")
    assert node_role([py, "-m", "workers.ina.worker_node", job, "--worker", "1"], job,
                     workers) == ("worker", "h2")
    assert node_role([py, "-m", "workers.ina.worker_node", "/other/job.json", "--worker",
                      "1"], job, workers) is None
