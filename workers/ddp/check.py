"""Exactness of a DDP run from the ranks' saved buckets (``InaHookState.save``), without torch.

The bar of docs/design.md §3.9, per bucket: every rank's int32 sum equals the wrap-around sum of
all ranks' quantized buckets.  Checked from the files, independently of the hook that wrote
them (the runner reports it as ``exact_all_rounds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workers.ina.messages import wrap_sum


def check_exact(rank_files: Sequence[str | Path]) -> dict:
    """``{"exact": bool, "steps": n, "buckets": n, "mismatches": [key, ...] (first 20),
    "step_exact": [bool per step 0 .. n-1]}``.

    Not exact as well when the ranks recorded different buckets or a bucket has no sum."""
    recs = [np.load(Path(p)) for p in rank_files]
    if not recs:
        raise ValueError("no rank files")
    qkeys = [sorted(k for k in r.files if k.endswith("_q")) for r in recs]
    mismatches: list[str] = []
    differ = any(k != qkeys[0] for k in qkeys[1:])
    if differ:
        mismatches.append("ranks recorded different buckets")
    steps = sorted({int(k.split("_")[0][1:]) for k in qkeys[0]})
    step_ok = dict.fromkeys(steps, not differ)  # keys are "s<step>_b<bucket>_q"
    for qk in qkeys[0]:
        sk = qk[:-2] + "_sum"
        step = int(qk.split("_")[0][1:])
        if any(qk not in r.files or sk not in r.files for r in recs):
            mismatches.append(sk)
            step_ok[step] = False
            continue
        exact = wrap_sum([r[qk] for r in recs])
        if not all(np.array_equal(r[sk], exact) for r in recs):
            mismatches.append(sk)
            step_ok[step] = False
    # a step no rank recorded (steps are numbered from 0) is not exact either
    step_exact = [step_ok.get(s, False) for s in range(steps[-1] + 1 if steps else 0)]
    return {"exact": not mismatches, "steps": len(steps), "buckets": len(qkeys[0]),
            "mismatches": mismatches[:20], "step_exact": step_exact}
