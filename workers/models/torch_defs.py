"""``torch.nn`` definitions of ResNet-50 v1.5, VGG-16 and BERT-base, written for this project
from the papers' architectures (no torchvision, no transformers, nothing downloaded).

They exist so that the tensor lists of :mod:`workers.models.shapes` -- what the workers and
the runner use, without importing torch -- are checked against real modules: a test builds
each model (on the ``meta`` device: shapes, no memory) and compares ``named_parameters()``
with the shape list, name by name and shape by shape.  Every model runs forward too (a
test does it on tiny inputs), so they are models, not shape tables.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ResNet50", "Vgg16", "BertBase", "build"]


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride: v1.5), 1x1 expand (x4), with a projection
    shortcut when the shape changes."""

    def __init__(self, inplanes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes * 4:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    """Stem (7x7/2 convolution, max pool), stages of 3, 4, 6, 3 bottlenecks, average pool,
    fully connected."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = 64
        for i, (planes, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2),
                                                      (512, 3, 2)), 1):
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(inplanes, planes, stride if b == 0 else 1))
                inplanes = planes * 4
            setattr(self, f"layer{i}", nn.Sequential(*layer))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Vgg16(nn.Module):
    """Configuration D: 13 3x3 convolutions (ReLU, max pools), 7x7 adaptive average pool,
    classifier 25088 -> 4096 -> 4096 -> classes with dropout."""

    def __init__(self, num_classes: int = 1000) -> None:
        from workers.models.shapes import VGG16_CONVS

        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for v in VGG16_CONVS:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c_in, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                c_in = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
            nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class _SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, h = x.shape
        d = h // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, n, h)


class _Dense(nn.Module):
    """A dense layer followed by dropout, residual add and LayerNorm (BERT's "output")."""

    def __init__(self, n_in: int, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(n_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)  # noqa: N815 -- BERT's tensor names

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class _Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.self = _SelfAttention(hidden, heads)
        self.output = _Dense(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x), x)


class _Intermediate(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, intermediate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.attention = _Attention(hidden, heads)
        self.intermediate = _Intermediate(hidden, intermediate)
        self.output = _Dense(intermediate, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attention(x)
        return self.output(self.intermediate(a), a)


class _Embeddings(nn.Module):
    def __init__(self, vocab: int, hidden: int, positions: int, types: int) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(types, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)  # noqa: N815

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(pos)
                              + self.token_type_embeddings(torch.zeros_like(ids)))


class _Encoder(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(hidden, heads, intermediate) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x)
        return x


class _Pooler(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x[:, 0]))


class BertBase(nn.Module):
    """BERT-base: embeddings (word, position, token type, LayerNorm), 12 post-norm encoder
    layers (12-head self-attention, GELU feed-forward 3072), pooler on the first token."""

    def __init__(self, vocab: int = 30522, hidden: int = 768, layers: int = 12,
                 heads: int = 12, intermediate: int = 3072, positions: int = 512,
                 types: int = 2) -> None:
        super().__init__()
        self.embeddings = _Embeddings(vocab, hidden, positions, types)
        self.encoder = _Encoder(layers, hidden, heads, intermediate)
        self.pooler = _Pooler(hidden)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.pooler(self.encoder(self.embeddings(ids)))


def build(name: str) -> nn.Module:
    """The module of workload ``name`` (:data:`workers.models.shapes.WORKLOADS`)."""
    classes = {"resnet50": ResNet50, "vgg16": Vgg16, "bert-base": BertBase}
    if name not in classes:
        raise ValueError(f"unknown model {name!r} (expected {', '.join(classes)})")
    return classes[name]()
