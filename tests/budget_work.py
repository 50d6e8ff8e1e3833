"""An article worker's work that misbehaves on request, to test the per-article budget (issue 32).

``ArticleWorkers`` runs ``budget_work:misbehaving_article`` in its worker processes (the tests'
``sys.path`` goes with them): an item whose guid names a misbehaviour does it; any other item is
built as ingest builds it.
"""

from __future__ import annotations

import os
import signal
import time

from tasks.ingest.article import PageError, article_or_error
from tasks.ingest.budget import ArticleRequest
from transforms.records import ArticleRow

WORK = f"{__name__}:misbehaving_article"
ALLOCATE_MB = 1024
"""What the ``allocate`` item asks for, a megabyte at a time: more than any test budget allows."""


def misbehaving_article(request: ArticleRequest) -> ArticleRow | PageError:
    guid = request.item.guid
    if guid == "sleep":
        time.sleep(600)
    elif guid == "allocate":
        held = [bytearray(2**20) for _ in range(ALLOCATE_MB)]
        del held
    elif guid == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return article_or_error(request)
