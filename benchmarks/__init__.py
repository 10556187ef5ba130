"""Benchmarks (not tests): perf_analyzer against tritium and its references."""
