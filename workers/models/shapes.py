"""The parameter tensors of real models, in registration order, from their published shapes
(pure Python, no torch): what ``model.parameters()`` yields for the ``torch.nn`` definitions
of :mod:`workers.models.torch_defs` (a test builds both and compares them tensor by tensor).

* ``resnet50``: ResNet-50 v1.5 (He et al. 2016, "Deep Residual Learning"; the stride of a
  down-sampling bottleneck on its 3x3 convolution, as torchvision's ``resnet50``), 1000
  classes: 161 tensors, 25,557,032 parameters (torchvision's published ``num_params``).
* ``vgg16``: VGG-16 without batch norm (Simonyan & Zisserman 2015, configuration D), 1000
  classes, 7x7 adaptive pooling before the classifier as torchvision's ``vgg16``: 32 tensors,
  138,357,544 parameters (torchvision's published ``num_params``).
* ``bert-base``: BERT-base uncased (Devlin et al. 2019: 12 layers, hidden 768, 12 heads,
  intermediate 3072, vocabulary 30,522, 512 positions, 2 token types) as Hugging Face's
  ``BertModel`` with its pooler: 199 tensors, 109,482,240 parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

__all__ = ["Tensor", "Workload", "WORKLOADS", "resnet50", "vgg16", "bert_base", "workload"]


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor: its dotted name (as ``named_parameters``) and shape."""

    name: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class Workload:
    """A real model as its gradient: the tensors in registration order."""

    name: str
    tensors: tuple[Tensor, ...]

    @property
    def n_params(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def numels(self) -> list[int]:
        return [t.numel for t in self.tensors]


def _bn(prefix: str, c: int) -> list[Tensor]:
    return [Tensor(f"{prefix}.weight", (c,)), Tensor(f"{prefix}.bias", (c,))]


def resnet50(num_classes: int = 1000) -> Workload:
    """ResNet-50 v1.5: stem, 3-4-6-3 bottlenecks (expansion 4), fully connected head."""
    out = [Tensor("conv1.weight", (64, 3, 7, 7)), *_bn("bn1", 64)]
    inplanes = 64
    for layer, (planes, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3)), 1):
        for b in range(blocks):
            p = f"layer{layer}.{b}"
            out += [Tensor(f"{p}.conv1.weight", (planes, inplanes, 1, 1)), *_bn(f"{p}.bn1", planes),
                    Tensor(f"{p}.conv2.weight", (planes, planes, 3, 3)), *_bn(f"{p}.bn2", planes),
                    Tensor(f"{p}.conv3.weight", (planes * 4, planes, 1, 1)),
                    *_bn(f"{p}.bn3", planes * 4)]
            if b == 0:  # the projection shortcut of each stage's first block
                out += [Tensor(f"{p}.downsample.0.weight", (planes * 4, inplanes, 1, 1)),
                        *_bn(f"{p}.downsample.1", planes * 4)]
            inplanes = planes * 4
    out += [Tensor("fc.weight", (num_classes, 2048)), Tensor("fc.bias", (num_classes,))]
    return Workload("resnet50", tuple(out))


VGG16_CONVS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
               512, 512, 512, "M")


def vgg16(num_classes: int = 1000) -> Workload:
    """VGG-16 (configuration D): 13 3x3 convolutions with bias, three fully connected."""
    out, c_in, i = [], 3, 0
    for v in VGG16_CONVS:
        if v != "M":
            out += [Tensor(f"features.{i}.weight", (int(v), c_in, 3, 3)),
                    Tensor(f"features.{i}.bias", (int(v),))]
            c_in = int(v)
            i += 2  # conv, ReLU
        else:
            i += 1  # max pool
    for j, (n_in, n_out) in zip((0, 3, 6), ((512 * 7 * 7, 4096), (4096, 4096),
                                          (4096, num_classes)), strict=True):
        out += [Tensor(f"classifier.{j}.weight", (n_out, n_in)),
                Tensor(f"classifier.{j}.bias", (n_out,))]
    return Workload("vgg16", tuple(out))


def bert_base(vocab: int = 30522, hidden: int = 768, layers: int = 12,
              intermediate: int = 3072, positions: int = 512, types: int = 2) -> Workload:
    """BERT-base as ``BertModel``: embeddings, 12 encoder layers, pooler."""
    h = hidden

    def dense(name: str, n_out: int, n_in: int) -> list[Tensor]:
        return [Tensor(f"{name}.weight", (n_out, n_in)), Tensor(f"{name}.bias", (n_out,))]

    def norm(name: str) -> list[Tensor]:
        return [Tensor(f"{name}.weight", (h,)), Tensor(f"{name}.bias", (h,))]

    out = [Tensor("embeddings.word_embeddings.weight", (vocab, h)),
           Tensor("embeddings.position_embeddings.weight", (positions, h)),
           Tensor("embeddings.token_type_embeddings.weight", (types, h)),
           *norm("embeddings.LayerNorm")]
    for k in range(layers):
        p = f"encoder.layer.{k}"
        out += [*dense(f"{p}.attention.self.query", h, h), *dense(f"{p}.attention.self.key", h, h),
                *dense(f"{p}.attention.self.value", h, h),
                *dense(f"{p}.attention.output.dense", h, h), *norm(f"{p}.attention.output.LayerNorm"),
                *dense(f"{p}.intermediate.dense", intermediate, h),
                *dense(f"{p}.output.dense", h, intermediate), *norm(f"{p}.output.LayerNorm")]
    out += dense("pooler.dense", h, h)
    return Workload("bert-base", tuple(out))


WORKLOADS = {"resnet50": resnet50, "vgg16": vgg16, "bert-base": bert_base}


def workload(name: str) -> Workload:
    """The workload ``name`` (one of :data:`WORKLOADS`); ValueError for another."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown model {name!r} (expected {', '.join(WORKLOADS)})")
    return WORKLOADS[name]()
