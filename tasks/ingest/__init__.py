"""Ingest, one module per step of an article's path from a feed to the article log.

| step | module | record it hands on |
|---|---|---|
| plan: due feeds of publishers not opted out, sharded by host, pushed feeds first | ``plan.py`` | ``FeedJob`` (with its ``FeedState``) |
| robots.txt: the verdicts earlier runs fetched, fetch the rest, save what was fetched | ``robots.py`` | ``RobotsEntry`` |
| poll: each source read by the reader of its kind (a feed: conditional GET and parse) under per-host limits; the outcome is decided by ``transforms.poll_outcome.settle_poll`` | ``poll.py``, ``readers.py`` | ``ShardResult`` (``FeedState``, ``FeedReport``) |
| pages: fetch each new item's page, build its row (never the body) in an article worker under a time and memory budget | ``pages.py`` (fetch), ``article.py`` (row), ``budget.py`` (workers) | ``ArticleRow`` or ``PageError`` |
| commit: one content-keyed article segment, identities, feed states, push markers, robots cache, WebSub upkeep | ``commit.py`` | the run summary |

The flow (``flows/ingest.py``) calls the Prefect task at the bottom of each module; each task is
named after the plain function it wraps, which the tests call directly. ``FeedJob`` lives in
``feed_job.py`` and ``article.py`` imports no Prefect: an article worker unpickles the one and runs the
other (issue 32).

Adding a kind of source
-----------------------
A source is polled by the reader of its kind (``FeedJob.kind``, ``readers.SOURCE_READERS``); the
only kind today is ``feed`` (RSS, Atom, JSON Feed and news sitemaps, told apart by
``transforms.feeds.parse_feed`` from their content). A source that is not a feed (an API, a page
of links) gets:

1. a name in ``feed_job.SourceKind`` and, in ``feed_job.source_kind_of``, the rule that tells it
   apart from what the registry already stores (the kind itself is never stored, so no table
   changes shape);
2. a reader in ``readers.py``: ``(job, client, settings) -> PollExchange``, its items as a
   ``transforms.feeds.ParsedFeed`` of ``FeedItem`` records (a parser of its own belongs in
   ``transforms/``), registered in ``SOURCE_READERS``; it requests through ``tasks.http`` so the SSRF
   checks, timeouts and body caps hold, and never raises for what the publisher sends;
3. tests of the reader over a loopback server, like ``tests/tasks/ingest/test_poll.py``.

Everything after the read (per-host limits, new items, the next poll, pages, the commit) is the
same for every kind.
"""
