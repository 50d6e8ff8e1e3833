"""Rank & publish: score stories per edition (DuckDB SQL + polars), assemble pages, validate, publish.

Everything a page depends on is read from the store as it was at ``now``: the logs (articles,
story changes), the registry, and the page versions published just before ``now`` (the previous
version of each page, for stability and for the stories the story snapshot keeps; the edition's
previous pool, which carries the day's representative impressions for the 10% cap), and the story
snapshots published before ``now``. So ``rebuild_as_of`` can recompute a past minute
byte for byte, as far back as page versions are kept.

Side effects of a cycle besides pages (issue 5, documented in docs/snapshots.md):
- ``log/events/story.breaking/<story_id>.json``: one event when a story first turns Breaking;
- ``state/boosts/feeds.json``: ``{publisher_id: until}`` for the publishers of Breaking stories,
  for ingest to poll their feeds faster until then (conditional put);
- ``log/events/live/``: the same Breaking news keyed by time, for serving's live stream, and
  ``pages/search/``: the search index of the live window (issue 30; ``tasks/live.py``,
  ``tasks/search.py``).

A cycle is extract → transform → load, three Prefect tasks (``flows/rank.py``):
``extract`` (:func:`tasks.rank.extract.extract_rank_inputs`: the story aggregates folded, the page
versions live before ``now``), ``compute`` (:func:`tasks.rank.compute.compute_rank_pages` around the
pure :func:`transforms.rank_pages.rank_pages`) and ``publish`` (:func:`tasks.rank.publish.publish_rank_pages`).
Beside them: ``params`` (the settings as the transforms' parameters), ``history`` (which page
version was live when) and ``rebuild`` (``newsroom rank --as-of``, ``newsroom pages rollback``). The
story aggregates are ``tasks.aggregates``; where a ranking signal lives is docs/ranking-signals.md.
"""
