"""Benchmarks: each runs a contender and its baseline in one run and writes JSON to results/."""
