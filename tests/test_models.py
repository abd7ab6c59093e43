"""Real models' gradients (docs/models.md): shapes against the project's ``torch.nn``
definitions and the published parameter counts, DDP's buckets against torch's own bucketing,
the scaling and the projection against hand-computed numbers, the synthetic gradients."""

from __future__ import annotations

import numpy as np
import pytest

from workers.models.buckets import ddp_buckets
from workers.models.profiles import PROFILES
from workers.models.scaling import (
    projection,
    ring_comm_s,
    scale_workload,
    scaled_numels,
)
from workers.models.shapes import WORKLOADS, workload
from workers.models.synthetic import make_replica, synthetic_gradient

# torchvision's published num_params (resnet50, vgg16 model pages) and Hugging Face
# BertModel (bert-base-uncased, with pooler)
PUBLISHED = {"resnet50": 25_557_032, "vgg16": 138_357_544, "bert-base": 109_482_240}
TENSORS = {"resnet50": 161, "vgg16": 32, "bert-base": 199}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_published_parameter_counts(name: str) -> None:
    w = workload(name)
    assert w.n_params == PUBLISHED[name]
    assert len(w.tensors) == TENSORS[name]


def test_hand_counted_pieces() -> None:
    r = {t.name: t.numel for t in workload("resnet50").tensors}
    assert r["conv1.weight"] == 64 * 3 * 7 * 7 == 9408
    assert r["layer4.0.downsample.0.weight"] == 2048 * 1024
    assert r["fc.weight"] == 2048 * 1000
    v = workload("vgg16").tensors
    assert v[-6].name == "classifier.0.weight" and v[-6].numel == 25088 * 4096
    b = workload("bert-base").tensors
    assert b[0].numel == 30522 * 768 and b[-1].name == "pooler.dense.bias"
    # one encoder layer: 4 attention projections, 2 LayerNorms, feed-forward 768-3072-768
    layer = sum(t.numel for t in b if t.name.startswith("encoder.layer.0."))
    assert layer == 4 * (768 * 768 + 768) + 2 * 2 * 768 + (768 * 3072 + 3072) + (3072 * 768 + 768)
    assert layer == 7_087_872


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_shapes_equal_the_torch_definitions(name: str) -> None:
    torch = pytest.importorskip("torch")
    from workers.models.torch_defs import build

    with torch.device("meta"):
        model = build(name)
    got = [(k, tuple(p.shape)) for k, p in model.named_parameters()]
    assert got == [(t.name, t.shape) for t in workload(name).tensors]


def test_torch_definitions_run_forward() -> None:
    torch = pytest.importorskip("torch")
    from workers.models.torch_defs import BertBase, ResNet50, Vgg16

    torch.manual_seed(0)
    with torch.no_grad():
        assert ResNet50(10).eval()(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
        assert Vgg16(10).eval()(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
        bert = BertBase(vocab=50, hidden=24, layers=2, heads=4, intermediate=48, positions=16)
        assert bert.eval()(torch.zeros(2, 5, dtype=torch.long)).shape == (2, 24)


def test_buckets_by_hand() -> None:
    # 4-byte elements, limits 40 then 100 bytes, ready in reverse: [3]=12 -> 48 B >= 40
    # closes; then [2]=10 (40 B), [1]=20 (+80 = 120 >= 100) closes; [0] left
    assert ddp_buckets([5, 20, 10, 12], first_bytes=40, cap_bytes=100) == [[3], [2, 1], [0]]
    assert ddp_buckets([5, 20, 10, 12], first_bytes=40, cap_bytes=100,
                       ready_order=[0, 1, 2, 3]) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError):
        ddp_buckets([1, 2], ready_order=[0, 0])


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_buckets_equal_torch_bucketing(name: str) -> None:
    """Our buckets are those torch's reducer computes for the tensors in reverse order with
    DDP's limits (1 MiB first, 25 MiB after)."""
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch without distributed")
    w = workload(name)
    rev = [torch.empty(t.shape, device="meta") for t in reversed(w.tensors)]
    got, _ = dist._compute_bucket_assignment_by_size(
        rev, [dist._DEFAULT_FIRST_BUCKET_BYTES, 25 * 2**20], [False] * len(rev))
    n = len(w.tensors)
    ours = ddp_buckets(w.numels)
    assert [[n - 1 - i for i in b] for b in got] == ours


def test_resnet50_buckets() -> None:
    w = workload("resnet50")
    b = ddp_buckets(w.numels)
    # fc.bias + fc.weight = 2,049,000 values (8.2 MB >= 1 MiB) is the first bucket
    assert b[0] == [160, 159]
    assert len(b) == 5 and sorted(i for x in b for i in x) == list(range(161))


def test_scaled_numels_largest_remainder() -> None:
    # total 10, scale 3 -> 4 values; quotas 5·4/10 = 2, 3·4/10 = 1.2, 2·4/10 = 0.8: floors
    # 2, 1, 0 and the one left to the largest remainder (0.8)
    assert scaled_numels([5, 3, 2], 3) == [2, 1, 1]
    assert scaled_numels([1, 1, 1], 2) == [1, 1, 0]  # ceil(3/2)=2: ties to the earlier
    assert scaled_numels([7], 1) == [7]
    with pytest.raises(ValueError):
        scaled_numels([1], 0)


def test_scale_workload_resnet50() -> None:
    sw = scale_workload("resnet50", 10_000, 10.0)
    assert sw.n_values == 2556 == -(-25_557_032 // 10_000)
    assert sw.emulated_mbps == pytest.approx(1.0)
    assert sw.time_factor == pytest.approx(2556 * 10_000 / 25_557_032)
    assert sw.compute_s == pytest.approx(256 / 1200)  # NVIDIA's V100 figure
    assert sw.emulated_compute_s == pytest.approx(256 / 1200 * sw.time_factor)
    assert sum(sum(sw.numels[i] for i in b) for b in sw.buckets()) == 2556


def test_ring_and_projection_by_hand() -> None:
    # ring: 2·(4-1)/4 · 32 bits · 1e6 values / 1e9 bit/s = 0.048 s
    assert ring_comm_s(1_000_000, 4, 1.0) == pytest.approx(0.048)
    assert ring_comm_s(10, 1, 1.0) == 0.0
    sw = scale_workload("resnet50", 10_000, 10.0, compute_s=0.2)
    f = sw.time_factor
    p = projection(sw, 4, {"ina": 0.1, "ps_only": 0.4}, {"gloo": 0.2 * f + 0.3})
    steps = p["projected_step_s"]
    assert steps["ina"] == pytest.approx(0.2 + 0.1 / f)
    assert steps["ps_only"] == pytest.approx(0.2 + 0.4 / f)
    assert steps["gloo"] == pytest.approx(0.2 + 0.3 / f)
    ring = 0.2 + 1.5 * 32 * 25_557_032 / 10e9  # 0.2 + 0.12267 s
    assert steps["ring_allreduce"] == pytest.approx(ring)
    assert p["speedup_vs_ps_only"] == pytest.approx((0.2 + 0.4 / f) / (0.2 + 0.1 / f))
    assert p["speedup_vs_ring"] == pytest.approx(ring / (0.2 + 0.1 / f))
    assert projection(sw, 4, {"ps_only": 1.0})["speedup_vs_ring"] is None


def test_profiles_state_their_source() -> None:
    for p in PROFILES.values():
        assert p.kind in ("published", "derived") and p.source and p.step_s > 0
        assert p.kind == "published" or p.note
    assert PROFILES["resnet50"].step_s == pytest.approx(0.21333, rel=1e-4)


def test_synthetic_gradients_seeded() -> None:
    a = synthetic_gradient(100, 0, 1, 2)
    assert a.dtype == np.float32 and np.array_equal(a, synthetic_gradient(100, 0, 1, 2))
    assert not np.array_equal(a, synthetic_gradient(100, 0, 2, 2))
    assert not np.array_equal(a, synthetic_gradient(100, 0, 1, 3))
    from workers.common.model import TrainConfig

    rep = make_replica(TrainConfig(model="vgg16", n_workers=2, scale=100_000), 1)
    loss, g = rep.gradient(0)
    assert g.size == -(-138_357_544 // 100_000) and np.isnan(loss)
    assert np.array_equal(g, synthetic_gradient(g.size, 0, 1, 0))


def _no_launch(*_a: object, **_k: object) -> None:
    raise AssertionError("bad input reached the launcher")


@pytest.mark.parametrize("argv, needle", [
    (["--method", "ring", "--model", "resnet50"], "--method ina or --method ddp"),
    (["--model", "mlp", "--scale", "10"], "--scale applies to a real model"),
    (["--model", "logreg", "--compute-ms", "5"], "--compute-ms applies"),
    (["--model", "resnet50", "--bw", "5"], "drop --bw"),
    (["--model", "vgg16", "--link-gbps", "0"], "--link-gbps must be > 0"),
    (["--model", "bert-base", "--compute-ms", "-1"], "--compute-ms must be >= 0"),
    (["--model", "resnet50", "--jobs", "2"], "runs as one job"),
])
def test_bad_workload_options(argv: list[str], needle: str, tmp_path,
                              capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    import controller.cli.run
    from controller.cli.main import main

    monkeypatch.setattr(controller.cli.run, "execute", _no_launch)
    try:
        code = main(["run", *argv, "--out", str(tmp_path)])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code not in (0, None) and len(err) == 1 and needle in err[0], err


def test_settings_of_a_real_model() -> None:
    import argparse

    from controller.experiment.methods.ina.options import add_ina_arguments, settings_from_args
    from controller.experiment.run_options import add_shared_options

    p = argparse.ArgumentParser()
    add_shared_options(p)
    add_ina_arguments(p)
    s = settings_from_args(p.parse_args(["--model", "resnet50", "--scale", "5000",
                                         "--link-gbps", "25", "--workers", "4"]))
    assert s.bw == pytest.approx(5.0)  # 25 Gbit/s / 5000
    sw = s.workload
    assert sw is not None and sw.n_values == 5112 and sw.scale == 5000
    s = settings_from_args(p.parse_args(["--model", "bert-base", "--compute-ms", "100"]))
    assert s.workload.compute_s == pytest.approx(0.1) and s.bw == pytest.approx(1.0)
    assert settings_from_args(p.parse_args([])).workload is None
