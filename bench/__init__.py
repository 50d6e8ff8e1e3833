"""The benchmarks: each module is one bench, run from the repository root as ``python -m bench.<name>``.

Every figure is measured against a baseline doing the same work in the same run, and printed with
the machine's load average; a bench that bench/headline.py reads prints its figures last, as one
JSON line. What they share lives in :mod:`bench.harness`. ``make bench`` runs the headline set.
"""
