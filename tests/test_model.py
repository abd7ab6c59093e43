"""Digits data, numpy models, SGD and the single-process reference training (docs/design.md §3.9)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from workers.common.data import batch_indices, load_digits_split, shard_indices
from workers.common.model import (
    Mlp,
    Replica,
    Sgd,
    SoftmaxRegression,
    TrainConfig,
    make_model,
    mean_sync,
    train_synchronous,
)


@pytest.fixture(scope="module")
def data():
    return load_digits_split(0.2, seed=0)


def test_split_is_deterministic_stratified_and_disjoint(data):
    again = load_digits_split(0.2, seed=0)
    assert np.array_equal(data.x_train, again.x_train)
    assert np.array_equal(data.y_test, again.y_test)
    assert len(data.y_train) + len(data.y_test) == 1797
    assert data.n_features == 64 and data.n_classes == 10
    assert data.x_train.dtype == np.float32 and 0.0 <= data.x_train.min() <= data.x_train.max() <= 1
    # stratified: every class in the test set, in proportion within one sample
    counts = np.bincount(data.y_test, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37
    other = load_digits_split(0.2, seed=1)
    assert not np.array_equal(data.y_test, other.y_test)


def test_shards_partition_and_batches_stay_in_shard():
    shards = shard_indices(103, 4, seed=3)
    assert sorted(len(s) for s in shards) == [25, 26, 26, 26]
    assert np.array_equal(np.sort(np.concatenate(shards)), np.arange(103))
    s = shards[3]
    assert len(s) == 25
    seen = np.concatenate([batch_indices(s, r, 5, seed=3, worker_id=1) for r in range(6)])
    # stream positions 0..24 are epoch 0 and 25..29 start epoch 1: each a permutation prefix
    assert np.array_equal(np.sort(seen[:25]), s)
    assert len(set(seen[25:])) == 5 and set(seen[25:]) <= set(s)
    b = batch_indices(s, 7, 5, seed=3, worker_id=1)
    assert np.array_equal(b, batch_indices(s, 7, 5, seed=3, worker_id=1))
    assert set(b) <= set(s)
    assert not np.array_equal(b, batch_indices(s, 7, 5, seed=3, worker_id=2))
    with pytest.raises(ValueError):
        batch_indices(s, 0, 30, seed=3, worker_id=1)
    with pytest.raises(ValueError):
        shard_indices(3, 4)


@pytest.mark.parametrize("kind", ["logreg", "mlp"])
def test_gradient_matches_finite_differences(kind, data):
    model = make_model(kind, 64, 10, hidden=8, l2=0.01)
    params = model.init(seed=1, dtype=np.float64)
    params += np.random.default_rng(2).normal(0, 0.1, params.shape)  # non-zero biases too
    x, y = data.x_train[:20], data.y_train[:20]
    _, g = model.loss_and_grad(params, x, y)
    rng = np.random.default_rng(0)
    eps = 1e-6
    for i in rng.choice(model.n_params, 40, replace=False):
        e = np.zeros_like(params)
        e[i] = eps
        fd = (model.loss(params + e, x, y) - model.loss(params - e, x, y)) / (2 * eps)
        assert abs(fd - g[i]) <= 1e-6 + 1e-5 * abs(fd), (i, fd, g[i])


def test_flat_vector_layout():
    m = Mlp(4, 3, 2)
    assert m.n_params == 4 * 3 + 3 + 3 * 2 + 2
    p = np.arange(m.n_params, dtype=np.float32)
    v = m.unpack(p)
    assert v["W1"][0, 0] == 0 and v["b1"][0] == 12 and v["W2"][0, 0] == 15 and v["b2"][1] == 22
    v["b2"][1] = -1
    assert p[-1] == -1  # views, not copies
    with pytest.raises(ValueError):
        m.unpack(np.zeros(5, dtype=np.float32))
    with pytest.raises(ValueError):
        make_model("cnn", 4, 2)


def test_softmax_gradient_by_hand():
    # one sample, zero weights: softmax is uniform 1/2, dL/dz = (1/2 - 1, 1/2) for label 0
    m = SoftmaxRegression(2, 2)
    loss, g = m.loss_and_grad(np.zeros(6), np.array([[1.0, 2.0]]), np.array([0]))
    assert loss == pytest.approx(np.log(2))
    assert np.allclose(m.unpack(g)["W"], [[-0.5, 0.5], [-1.0, 1.0]])
    assert np.allclose(m.unpack(g)["b"], [-0.5, 0.5])


def test_sharded_mean_gradient_equals_union_gradient(data):
    cfg = TrainConfig(model="mlp", n_workers=4, batch_size=10, seed=5)
    reps = [Replica(cfg, w, data) for w in range(4)]
    grads = [rep.gradient(3)[1] for rep in reps]
    union = np.concatenate([
        batch_indices(rep.shard, 3, 10, cfg.seed, rep.worker_id) for rep in reps
    ])
    assert len(set(union)) == 40  # shards are disjoint
    params = reps[0].params.astype(np.float64)
    _, full = reps[0].model.loss_and_grad(params, data.x_train[union], data.y_train[union])
    assert np.allclose(mean_sync(grads), full, atol=1e-6)


def test_sgd_momentum_by_hand():
    p = np.array([1.0, 2.0], dtype=np.float32)
    opt = Sgd(lr=0.5, momentum=0.9)
    opt.step(p, np.array([1.0, -2.0], dtype=np.float32))  # v = g
    assert np.allclose(p, [0.5, 3.0])
    opt.step(p, np.array([1.0, 0.0], dtype=np.float32))  # v = 0.9*(1,-2) + (1,0) = (1.9,-1.8)
    assert np.allclose(p, [0.5 - 0.95, 3.0 + 0.9])
    plain = np.array([1.0], dtype=np.float32)
    Sgd(lr=0.1).step(plain, np.array([2.0], dtype=np.float32))
    assert np.allclose(plain, [0.8])


@pytest.mark.parametrize("kind", ["logreg", "mlp"])
def test_reference_training_learns_digits_quickly(kind, data):
    t0 = time.perf_counter()
    res = train_synchronous(TrainConfig(model=kind, rounds=150, n_workers=4), data=data)
    assert time.perf_counter() - t0 < 10.0
    assert res.final_accuracy > 0.9
    assert res.accuracy[0] < 0.5  # it really learned
    assert len(res.accuracy) == len(res.loss) == 150
    again = train_synchronous(TrainConfig(model=kind, rounds=150, n_workers=4), data=data)
    assert np.array_equal(res.params, again.params)  # deterministic


def test_custom_sync_is_what_gets_applied(data):
    # a quantize-and-integer-sum sync (what INA does) stays close to the float reference
    scale = 2.0**20

    def int_sync(grads):
        q = [np.round(g * scale).astype(np.int32) for g in grads]
        total = np.sum(np.stack(q).astype(np.int64), axis=0).astype(np.int32)
        return (total / (scale * len(grads))).astype(np.float32)

    cfg = TrainConfig(model="mlp", rounds=60, n_workers=3)
    ref = train_synchronous(cfg, data=data)
    ina = train_synchronous(cfg, sync=int_sync, data=data)
    assert not np.array_equal(ref.params, ina.params)
    assert abs(ref.final_accuracy - ina.final_accuracy) <= 0.02
    zero = train_synchronous(cfg, sync=lambda g: np.zeros_like(g[0]), data=data)
    assert np.array_equal(zero.params, Replica(cfg, 0, data).params)  # nothing applied
