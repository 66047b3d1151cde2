"""Test doubles shared by the suites, the contract run and the benchmarks (not installed)."""
