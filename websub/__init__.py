"""The WebSub receiver: the web-facing half of WebSub, a service of its own (``newsroom websub``).

It answers hubs' intent checks, verifies signed deliveries and authenticated publisher pings, and
turns them into push markers the ingest polls first. Like serving, it is a web service that runs
apart from the pipeline; unlike serving, it writes pipeline state (subscription records and push
markers), so it cannot live in serving, which must never import tasks or transforms. It sits as
a top-level package beside serving and above tasks: it may import transforms (signatures,
leases), warehouse (the store) and tasks (the subscription records and push markers in
:mod:`tasks.websub`, events, settings); nothing imports it but flows, whose CLI runs it
(import-linter contracts in pyproject.toml). The subscribe/renew job it answers for stays in
:mod:`tasks.websub`, since the ingest runs it.
"""
