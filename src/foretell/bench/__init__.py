"""Benchmarks: the edit-pair corpus (:mod:`foretell.bench.corpus`) and the benchmark harness."""
