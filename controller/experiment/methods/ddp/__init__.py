"""``run --method ddp``: the runner (:mod:`.method`), PyTorch DDP through the switches."""
