"""One BLAS thread per host process (issue 26: what set the unshaped round's pace).

numpy's OpenBLAS starts one thread per core for a matrix product and lets them spin a while
after it.  A testbed runs many host processes on few cores (make run: 6 workers, a PS and 20
switches on 2), so a worker's test-accuracy product of a few hundred rows waited for BLAS
threads that other processes' threads had preempted: measured over loopback with make run's
job (``bench/ina_loopback.py --trace``), ``test_accuracy`` took 16-23 ms of wall time for
2-3 ms of the calling thread's CPU, and a round 0.15 s instead of 0.07 s.  One thread does the
same products (each output element is one thread's dot product either way, so the values do
not change: make run's accuracy stays 0.9250) without the hand-offs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["one_blas_thread"]


def one_blas_thread() -> Any:
    """Limit this process's BLAS libraries (already loaded or loaded later by numpy) to one
    thread; returns threadpoolctl's limiter (``restore_original_limits()`` undoes it)."""
    import numpy  # noqa: F401  (load the BLAS library, so that the limit reaches it)
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")
