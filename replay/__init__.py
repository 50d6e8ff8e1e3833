"""replay: a local publisher site that serves a news corpus as real feeds and pages on loopback.

``ReplaySite`` (``replay.site``) runs it; ``replay.corpus`` holds the deterministic schedule that
tests and benchmarks read as ground truth; ``python -m replay`` runs it from the command line.
Standard library only, and nothing from the other newsroom packages.
"""
