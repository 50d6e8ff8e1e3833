"""Ingest, one module per step of an article's path from a feed to the article log.

| step | module | record it hands on |
|---|---|---|
| plan: due feeds of publishers not opted out, sharded by host, pushed feeds first | ``plan.py`` | ``FeedJob`` (with its ``FeedState``) |
| robots.txt: the verdicts earlier runs fetched, fetch the rest, save what was fetched | ``robots.py`` | ``RobotsEntry`` |
| poll: conditional GET and parse of each feed under per-host limits; the outcome is decided by ``transforms.polling.settle_poll`` | ``poll.py`` | ``ShardResult`` (``FeedState``, ``FeedReport``) |
| pages: fetch each new item's page, build its row (never the body) in an article worker under a time and memory budget | ``pages.py`` (fetch), ``article.py`` (row), ``budget.py`` (workers) | ``ArticleRow`` or ``PageError`` |
| commit: one content-keyed article segment, identities, feed states, push markers, robots cache, WebSub upkeep | ``commit.py`` | the run summary |

The flow (``flows/ingest.py``) calls the Prefect task at the bottom of each module; each task is
named after the plain function it wraps, which the tests call directly. ``FeedJob`` lives in
``feed_job.py`` and ``article.py`` imports no Prefect: an article worker unpickles the one and runs the
other (issue 32).
"""
