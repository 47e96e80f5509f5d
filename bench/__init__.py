"""Benchmarks (``python -m bench.bench_models``); not imported by the app."""
