"""workers.common.threads: a worker's BLAS runs on one thread (issue 26)."""

from threadpoolctl import threadpool_info

from workers.common.threads import one_blas_thread


def test_one_blas_thread_limits_every_blas_library_and_restores() -> None:
    before = {i["filepath"]: i["num_threads"] for i in threadpool_info()
              if i["user_api"] == "blas"}
    assert before  # numpy's OpenBLAS is loaded
    limiter = one_blas_thread()
    try:
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    finally:
        limiter.restore_original_limits()
    assert {i["filepath"]: i["num_threads"] for i in threadpool_info()
            if i["user_api"] == "blas"} == before
