"""The number of torch (OpenMP) threads a test process and what it starts use; tests/conftest.py
sets it in the environment before anything imports numpy or torch. No imports but ``os``."""

import os

# One torch (OpenMP) thread per test process and per process a test starts (servers, workers,
# `python -m core.train`): make test runs two pytest-xdist processes on 2 cores, and two
# processes of 2 threads each made CPU-bound tests 5-45x slower than one thread each (OpenMP
# threads spinning for a core: the full-test-set check of the converged MNIST models took 75-119 s
# beside the RMC equivalence tests, 16 s with one thread each). RIMSCOPE_TEST_THREADS overrides.
TEST_THREADS = int(os.environ.get("RIMSCOPE_TEST_THREADS", "1"))
