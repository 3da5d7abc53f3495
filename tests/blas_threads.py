"""One BLAS thread for the simulation-heavy statistics tests.

Their optimisers (L-BFGS-B on a handful of parameters, thousands of times) call BLAS on tiny vectors; with
OpenBLAS's default two threads on a busy two-core machine each call waits for the other thread, and a test of
a second takes twenty. ``threadpoolctl`` ships with scikit-learn.
"""

import pytest


@pytest.fixture(autouse=True)
def one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield
