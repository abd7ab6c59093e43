"""``run --servers``: the pure placement (topo.cluster_placement) against hand-made answers,
the remote launch script, and the option's error lines (one line, non-zero exit, nothing
started) -- the cluster run itself is tests/test_servers_e2e.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli.main import main
from topo.cluster_placement import PlacementError, parse_servers, place, pods, tiers
from topo.models import parse_topology

ROOT = Path(__file__).resolve().parents[1]


def test_parse_servers_takes_names_and_addresses():
    assert parse_servers("here, 10.0.0.2 ,node-3.lab") == ("here", "10.0.0.2", "node-3.lab")


@pytest.mark.parametrize("spec, needle", [
    ("a", "at least two"), ("a,,b", "empty"), ("a,b,a", "a is named twice"),
    ("a,root@b", "not a host name"), ("a,b c", "not a host name")])
def test_parse_servers_refuses(spec, needle):
    with pytest.raises(PlacementError, match=needle):
        parse_servers(spec)


def test_fat_tree_tiers_and_pods():
    g = parse_topology("fattree:4")
    t = tiers(g)
    assert (t["edge0"], t["agg0"], t["core0"]) == (1, 2, 3)
    groups, top = pods(g)
    assert top == ["core0", "core1", "core2", "core3"]
    assert groups[1] == ["agg2", "agg3", "edge2", "edge3", "h4", "h5", "h6", "h7"]
    assert len(groups) == 4


def test_fat_tree_k4_on_two_servers_splits_pods_in_blocks():
    p = place(parse_topology("fattree:4"), ("a", "b"))
    # pods 0, 1 and the cores on a; pods 2, 3 (edge4-7, agg4-7, h8-h15) on b
    assert p.nodes_on("b") == ["agg4", "agg5", "agg6", "agg7", "edge4", "edge5", "edge6",
                               "edge7", *(f"h{i}" for i in range(8, 16))]
    assert p.server_of["core3"] == "a" and p.server_of["h7"] == "a"
    # core 2g+m joins agg g of every pod: agg4/agg6 -> core0, core1; agg5/agg7 -> core2, core3
    assert p.tunnels == (("agg4", "core0"), ("agg4", "core1"), ("agg5", "core2"),
                         ("agg5", "core3"), ("agg6", "core0"), ("agg6", "core1"),
                         ("agg7", "core2"), ("agg7", "core3"))


def test_three_servers_over_four_pods():
    p = place(parse_topology("fattree:4"), ("a", "b", "c"))
    # pod i of 4 on server i*3//4: pods 0, 1 -> a, b; 2 -> b; 3 -> c
    assert [p.server_of[f"edge{2 * i}"] for i in range(4)] == ["a", "a", "b", "c"]


def test_leaf_spine_places_a_leaf_with_its_hosts():
    p = place(parse_topology("leafspine:2,1,2"), ("a", "b"))
    assert p.nodes_on("b") == ["h2", "h3", "leaf1"]
    assert p.tunnels == (("leaf1", "spine0"),)


def test_one_tier_topologies_make_every_switch_a_pod():
    p = place(parse_topology("dumbbell:2,3"), ("a", "b"))
    assert p.nodes_on("b") == ["h2", "h3", "h4", "right"]
    assert p.tunnels == (("left", "right"),)


def test_more_servers_than_pods_is_refused():
    with pytest.raises(PlacementError, match="3 servers but the topology has only 2 pods"):
        place(parse_topology("leafspine:2,2,1"), ("a", "b", "c"))


def test_remote_script_ends_its_command_when_input_closes(tmp_path):
    from topo.mininet_cluster import remote_script

    script = remote_script([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"],
                           tmp_path)
    proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # input held open
    assert proc.wait(20) == 3 and proc.stdout.read() == "hi\n"
    proc.stdin.close()
    proc.stdout.close()
    sleeper = subprocess.Popen(["sh", "-c", remote_script(["sleep", "30"])],
                               stdin=subprocess.PIPE)
    sleeper.stdin.close()  # what a killed ssh does to the remote side
    assert sleeper.wait(10) == 143  # sleep ended by SIGTERM


@pytest.mark.parametrize("servers, needle", [
    ("here", "--servers 'here': name at least two servers"),
    ("127.0.0.1,nonexistent.invalid", "unknown host 'nonexistent.invalid'"),
    ("127.0.0.1,127.0.0.2,127.0.0.3", "3 servers but the topology has only 2 pods"),
    ("192.0.2.1,127.0.0.2", "the first server is the local one"),
    ("127.0.0.1,127.0.0.2", "cannot reach 127.0.0.2 (127.0.0.2) over ssh"),
])
def test_bad_servers_one_line_and_nothing_started(servers, needle, capsys, tmp_path,
                                                   monkeypatch):
    import topo.mininet_cluster as mc

    def no_network(*a: object, **k: object) -> None:
        raise AssertionError("a network was started")
    monkeypatch.setattr(mc, "build_cluster_net", no_network)
    code = main(["run", "--topo", "leafspine:2,1,1", "--workers", "1", "--servers", servers,
                 "--out", str(tmp_path), "--name", "x"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "Traceback" not in err, err
    assert needle in err, err
    assert not (tmp_path / "x").exists()


def test_ssh_config_needs_servers(capsys):
    assert main(["run", "--ssh-config", "/dev/null"]) != 0
    assert "--ssh-config applies to --servers" in capsys.readouterr().err


def test_bad_servers_exit_code_of_the_process():
    proc = subprocess.run([sys.executable, "-m", "controller", "run", "--servers", "x"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --servers 'x': name at least two servers, the local one first (A,B,...)"]
