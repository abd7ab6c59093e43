"""Each real model's compute time per training step on a named GPU, from a published source
(docs/models.md gives the table and the reasoning behind each figure).

``step_s`` is forward + backward + optimizer step of one data-parallel worker at
``batch`` samples; the emulation waits that long (times its time factor,
:mod:`workers.models.scaling`) before each round's gradient, and the projection adds it to
the real cluster's communication time.  ``kind`` says how the figure was obtained:
``published`` (a throughput table, step = batch / throughput) or ``derived`` (a published
throughput of a related model, converted by the models' published compute ratio, stated in
``note``).  ``run --compute-ms`` replaces the figure for one run.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Profile", "PROFILES", "profile"]


@dataclass(frozen=True)
class Profile:
    """One model's compute profile (module docstring)."""

    model: str
    gpu: str
    precision: str
    batch: int  # samples per worker and step
    throughput: float  # samples per second on one GPU (published, or derived: ``note``)
    kind: str  # "published" or "derived"
    source: str
    note: str = ""

    @property
    def step_s(self) -> float:
        return self.batch / self.throughput


_NVIDIA_RN50 = ("NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/"
                "README.md, 'Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)', 1 GPU, "
                "mixed precision: 1200 img/s at the default batch of 256 per GPU")
_NVIDIA_BERT = ("NVIDIA DeepLearningExamples, TensorFlow/LanguageModeling/BERT/README.md, "
                "'Pre-training training performance: single-node on DGX-1 32GB', 1 GPU, "
                "sequence length 128, mixed precision: 168.63 sequences/s for BERT-large at "
                "64 sequences per GPU")

PROFILES = {
    "resnet50": Profile("resnet50", "NVIDIA V100 16GB", "mixed", 256, 1200.0, "published",
                        _NVIDIA_RN50),
    # VGG-16 needs 15.3 G multiply-adds per 224x224 image and ResNet-50 3.8 G (He et al.
    # 2016, "Deep Residual Learning for Image Recognition", Table 1 and section 4.1): at the
    # same GPU efficiency its throughput is ResNet-50's x 3.8/15.3.
    "vgg16": Profile("vgg16", "NVIDIA V100 16GB", "mixed", 256, 1200.0 * 3.8 / 15.3, "derived",
                     _NVIDIA_RN50, "ResNet-50's published throughput x 3.8/15.3 (multiply-"
                     "adds per image, He et al. 2016)"),
    # Training compute per token is about 6 x parameters for both BERTs (Kaplan et al. 2020,
    # "Scaling Laws for Neural Language Models", section 2.1): BERT-base's throughput is
    # BERT-large's x 335,141,888 / 109,482,240 (the two models' parameter counts).
    "bert-base": Profile("bert-base", "NVIDIA V100 32GB", "mixed", 64,
                         168.63 * 335_141_888 / 109_482_240, "derived", _NVIDIA_BERT,
                         "BERT-large's published throughput x 335,141,888/109,482,240 "
                         "(parameters, compute ~ 6 x parameters per token)"),
}


def profile(model: str) -> Profile:
    """The profile of ``model``; ValueError for a model without one."""
    if model not in PROFILES:
        raise ValueError(f"no compute profile for {model!r} (have {', '.join(PROFILES)})")
    return PROFILES[model]
