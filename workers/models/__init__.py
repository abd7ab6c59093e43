"""Real models' gradients without downloading anything (docs/models.md): the parameter
tensors of ResNet-50, VGG-16 and BERT-base in the order their ``torch.nn`` definitions
register them (:mod:`workers.models.shapes`; the definitions themselves, for the tests that
compare, in :mod:`workers.models.torch_defs`), DDP's gradient buckets
(:mod:`workers.models.buckets`), each model's published compute profile
(:mod:`workers.models.profiles`), the scaled emulation and its projection back to the real
cluster (:mod:`workers.models.scaling`), and the synthetic, seeded gradients a worker sends
(:mod:`workers.models.synthetic`)."""
