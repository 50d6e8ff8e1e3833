"""Rank's story aggregates: one row per story and its members, folded each cycle from the logs.

Modules: ``cycle`` (fold what the logs gained, or rebuild; commit, fenced; the member cache),
``members`` (the registry, members read on demand, the view one cycle reads), ``logs`` (reading the
change, article and listing segments), ``compare`` (the stored aggregates beside a rebuild).
"""
