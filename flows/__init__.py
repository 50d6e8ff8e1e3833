"""Prefect flows (the order of the steps, fan-out, schedules) and the ``newsroom`` command line.

The map of one article's path through them, hop by hop, with each hop's record and file, heads
the README ("One article, hop by hop").
"""
