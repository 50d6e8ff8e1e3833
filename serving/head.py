"""HEAD on every GET route: the GET answer's status and headers, without its body.

RFC 9110 section 9.3.2: a server SHOULD send the same header fields in answer to HEAD as to GET,
and section 9.1 requires every general-purpose server to support HEAD. FastAPI routes only the
methods a route declares, so ``curl -I`` got 405 on every page. This ASGI middleware runs the GET
route for a HEAD request and sends its status and headers (``Content-Length``, ``ETag`` and
``Cache-Control`` included, so a conditional HEAD revalidates like a GET) and no body.

A route that must not act on a HEAD (the click redirect logs a click on GET) reads
:func:`is_head` from its request scope.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEAD_SCOPE_KEY = "newsroom.head"
"""Set (True) in the scope of a GET that answers a HEAD request."""


def is_head(scope: Scope) -> bool:
    """Whether this GET is being run to answer a HEAD request (its body is dropped)."""
    return bool(scope.get(HEAD_SCOPE_KEY))


class HeadAsGetMiddleware:
    """Answer HEAD with the GET route's status and headers and an empty body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        get_scope: Scope = {**scope, "method": "GET", HEAD_SCOPE_KEY: True}

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # the final, empty message below ends the response
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app(get_scope, receive, send_without_body)
