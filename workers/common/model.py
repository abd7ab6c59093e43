"""Numpy models with a flat parameter vector, SGD with momentum, and the reference training.

Models (classification, C classes, inputs x in R^d, labels y)
    ``SoftmaxRegression``:  z = x W + b
    ``Mlp`` (one hidden layer, tanh so the loss is smooth for finite-difference checks):
        h = tanh(x W1 + b1),  z = h W2 + b2
    Loss of a batch of n samples: mean cross-entropy of softmax(z) plus ``l2/2 * ||weights||^2``
    (weight matrices only, not biases):

        L = -(1/n) sum_i log softmax(z_i)[y_i] + (l2/2) sum ||W||^2
        dL/dz = (softmax(z) - onehot(y)) / n,  then back-propagated by the chain rule.

    All parameters live in ONE flat vector (float32 by default); ``unpack`` returns reshaped views
    into it, so the gradient is one flat vector of the same layout -- exactly what the workers
    quantize, cut into K-value chunks and synchronize.  Computation follows the dtype of the
    parameter vector (the gradient check uses float64).

Optimizer
    ``Sgd``: v <- mu v + g;  p <- p - lr v   (heavy-ball momentum; mu = 0 is plain SGD), applied
    to the flat vector.  Every worker applies the same synchronized gradient to the same
    parameters with the same optimizer state, so all replicas stay identical.

Synchronous training and the reference
    ``train_synchronous`` runs the distributed algorithm in one process: in round r each worker w
    computes the gradient g_w of its batch (``workers/common/data.py``) at the shared parameters; a
    ``sync`` function turns the W gradients into the applied gradient; every replica applies it.
    The default ``sync`` is the float mean (1/W) sum_w g_w: the single-process reference (same
    seeds, global batch = union of worker batches, gradient = mean of worker gradients, which is
    the gradient of the union because all batches have the same size).  The INA experiment
    compares its final accuracy with this reference.  A ``sync`` that quantizes each gradient
    and sums the integers exactly predicts an INA run's parameters bit for bit (shown by
    tests/test_ina_sim.py through a lossy simulated network).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from workers.common.data import Dataset, batch_indices, shard_indices


def _softmax_xent(z: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of logits ``z`` (n, C) against labels ``y``, and dL/dz."""
    n = z.shape[0]
    z = z - z.max(axis=1, keepdims=True)
    ez = np.exp(z)
    s = ez.sum(axis=1, keepdims=True)
    logp = z - np.log(s)
    loss = float(-logp[np.arange(n), y].mean())
    dz = ez / s
    dz[np.arange(n), y] -= 1.0
    dz /= n
    return loss, dz


@dataclass(frozen=True)
class _FlatModel:
    """Shared machinery: a list of named shapes laid out consecutively in one vector."""

    def shapes(self) -> list[tuple[str, tuple[int, ...]]]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def n_params(self) -> int:
        return sum(int(np.prod(s)) for _, s in self.shapes())

    def unpack(self, params: np.ndarray) -> dict[str, np.ndarray]:
        """Views of ``params`` by name (writing into a view writes into the flat vector)."""
        if params.ndim != 1 or params.shape[0] != self.n_params:
            raise ValueError(f"expected a flat vector of {self.n_params} parameters, "
                             f"got shape {params.shape}")
        out, off = {}, 0
        for name, shape in self.shapes():
            size = int(np.prod(shape))
            out[name] = params[off:off + size].reshape(shape)
            off += size
        return out

    def init(self, seed: int = 0, dtype: type = np.float32) -> np.ndarray:
        """Glorot-uniform weights, zero biases (seeded)."""
        rng = np.random.default_rng(seed)
        params = np.zeros(self.n_params, dtype=dtype)
        for view in self.unpack(params).values():
            if view.ndim == 2:
                lim = np.sqrt(6.0 / (view.shape[0] + view.shape[1]))
                view[...] = rng.uniform(-lim, lim, size=view.shape)
        return params

    def logits(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def loss_and_grad(
        self, params: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def loss(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        return self.loss_and_grad(params, x, y)[0]

    def predict(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.argmax(self.logits(params, x), axis=1)

    def accuracy(self, params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.predict(params, x) == y))


@dataclass(frozen=True)
class SoftmaxRegression(_FlatModel):
    """Multinomial logistic regression: z = x W + b."""

    n_features: int
    n_classes: int
    l2: float = 0.0

    def shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return [("W", (self.n_features, self.n_classes)), ("b", (self.n_classes,))]

    def logits(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        p = self.unpack(params)
        return x.astype(params.dtype, copy=False) @ p["W"] + p["b"]

    def loss_and_grad(
        self, params: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray]:
        p = self.unpack(params)
        x = x.astype(params.dtype, copy=False)
        loss, dz = _softmax_xent(x @ p["W"] + p["b"], y)
        grad = np.empty_like(params)
        g = self.unpack(grad)
        g["W"][...] = x.T @ dz + self.l2 * p["W"]
        g["b"][...] = dz.sum(axis=0)
        loss += 0.5 * self.l2 * float(np.sum(p["W"] * p["W"]))
        return loss, grad


@dataclass(frozen=True)
class Mlp(_FlatModel):
    """One hidden layer: h = tanh(x W1 + b1), z = h W2 + b2."""

    n_features: int
    n_hidden: int
    n_classes: int
    l2: float = 0.0

    def shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return [
            ("W1", (self.n_features, self.n_hidden)),
            ("b1", (self.n_hidden,)),
            ("W2", (self.n_hidden, self.n_classes)),
            ("b2", (self.n_classes,)),
        ]

    def logits(self, params: np.ndarray, x: np.ndarray) -> np.ndarray:
        p = self.unpack(params)
        h = np.tanh(x.astype(params.dtype, copy=False) @ p["W1"] + p["b1"])
        return h @ p["W2"] + p["b2"]

    def loss_and_grad(
        self, params: np.ndarray, x: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray]:
        p = self.unpack(params)
        x = x.astype(params.dtype, copy=False)
        h = np.tanh(x @ p["W1"] + p["b1"])
        loss, dz = _softmax_xent(h @ p["W2"] + p["b2"], y)
        grad = np.empty_like(params)
        g = self.unpack(grad)
        g["W2"][...] = h.T @ dz + self.l2 * p["W2"]
        g["b2"][...] = dz.sum(axis=0)
        da = (dz @ p["W2"].T) * (1.0 - h * h)
        g["W1"][...] = x.T @ da + self.l2 * p["W1"]
        g["b1"][...] = da.sum(axis=0)
        loss += 0.5 * self.l2 * float(np.sum(p["W1"] ** 2) + np.sum(p["W2"] ** 2))
        return loss, grad


Model = SoftmaxRegression | Mlp


def make_model(kind: str, n_features: int, n_classes: int, hidden: int = 32,
               l2: float = 1e-4) -> Model:
    """``kind`` is ``"logreg"`` or ``"mlp"``."""
    if kind == "logreg":
        return SoftmaxRegression(n_features, n_classes, l2)
    if kind == "mlp":
        if hidden < 1:
            raise ValueError(f"hidden units must be >= 1, got {hidden}")
        return Mlp(n_features, hidden, n_classes, l2)
    raise ValueError(f"unknown model {kind!r} (expected 'logreg' or 'mlp')")


@dataclass
class Sgd:
    """SGD with heavy-ball momentum on a flat parameter vector (updates it in place)."""

    lr: float
    momentum: float = 0.0
    velocity: np.ndarray | None = field(default=None, repr=False)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        if grad.shape != params.shape:
            raise ValueError(f"gradient shape {grad.shape} != parameter shape {params.shape}")
        g = grad.astype(params.dtype, copy=False)
        if self.momentum:
            if self.velocity is None:
                self.velocity = np.zeros_like(params)
            self.velocity *= self.momentum
            self.velocity += g
            g = self.velocity
        params -= params.dtype.type(self.lr) * g


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a synchronous training run (same on every replica)."""

    model: str = "mlp"
    hidden: int = 32
    l2: float = 1e-4
    n_workers: int = 4
    rounds: int = 200
    batch_size: int = 16  # per worker
    lr: float = 0.2
    momentum: float = 0.9
    seed: int = 0
    test_fraction: float = 0.2
    # a real model's scaled emulation (workers.models): the scale S and the compute time
    # each round waits before its gradient (s); unused by the numpy models
    scale: int = 1
    compute_s: float = 0.0


@dataclass
class TrainResult:
    params: np.ndarray
    accuracy: list[float]  # test accuracy after each round
    loss: list[float]  # mean worker batch loss of each round

    @property
    def final_accuracy(self) -> float:
        return self.accuracy[-1] if self.accuracy else float("nan")


class Replica:
    """What one worker holds: model, data, its shard, parameters and optimizer state.

    ``gradient(r)`` is worker ``worker_id``'s float32 gradient for round r; ``apply(g)`` applies
    a synchronized (averaged) gradient.  Both the distributed workers and the reference use it.
    """

    def __init__(self, cfg: TrainConfig, worker_id: int, data: Dataset | None = None) -> None:
        if not 0 <= worker_id < cfg.n_workers:
            raise ValueError(f"worker id {worker_id} not in [0, {cfg.n_workers})")
        self.cfg = cfg
        self.worker_id = worker_id
        self.data = data if data is not None else load_data(cfg)
        self.model = make_model(cfg.model, self.data.n_features, self.data.n_classes,
                                cfg.hidden, cfg.l2)
        self.shard = shard_indices(len(self.data.y_train), cfg.n_workers, cfg.seed)[worker_id]
        self.params = self.model.init(cfg.seed)
        self.opt = Sgd(cfg.lr, cfg.momentum)

    def gradient(self, round_: int) -> tuple[float, np.ndarray]:
        idx = batch_indices(self.shard, round_, self.cfg.batch_size, self.cfg.seed,
                            self.worker_id)
        loss, g = self.model.loss_and_grad(self.params, self.data.x_train[idx],
                                           self.data.y_train[idx])
        return loss, g.astype(np.float32, copy=False)

    def apply(self, grad: np.ndarray) -> None:
        self.opt.step(self.params, grad)

    def test_accuracy(self) -> float:
        return self.model.accuracy(self.params, self.data.x_test, self.data.y_test)


def load_data(cfg: TrainConfig) -> Dataset:
    from workers.common.data import load_digits_split

    return load_digits_split(cfg.test_fraction, cfg.seed)


SyncFn = Callable[[Sequence[np.ndarray]], np.ndarray]


def mean_sync(grads: Sequence[np.ndarray]) -> np.ndarray:
    """The float reference: (1/W) sum_w g_w in float32."""
    return (np.sum(np.stack(grads).astype(np.float64), axis=0) / len(grads)).astype(np.float32)


def train_synchronous(cfg: TrainConfig, sync: SyncFn = mean_sync,
                      data: Dataset | None = None) -> TrainResult:
    """Run ``cfg.rounds`` synchronous rounds in one process (see module docstring).

    One model copy stands for all replicas (they are identical by construction); only the
    worker-specific shards and batches differ.
    """
    data = data if data is not None else load_data(cfg)
    replicas = [Replica(cfg, w, data) for w in range(cfg.n_workers)]
    lead = replicas[0]
    acc: list[float] = []
    losses: list[float] = []
    for r in range(cfg.rounds):
        grads, round_losses = [], []
        for rep in replicas:
            rep.params = lead.params  # shared parameters (all replicas identical)
            loss, g = rep.gradient(r)
            grads.append(g)
            round_losses.append(loss)
        lead.apply(sync(grads))
        acc.append(lead.test_accuracy())
        losses.append(float(np.mean(round_losses)))
    return TrainResult(lead.params.copy(), acc, losses)
