"""``python -m serving``: run the API and reader page with uvicorn on the configured host and port.

``--host`` and ``--port`` override ``NEWSROOM_SERVING_HOST`` / ``NEWSROOM_SERVING_PORT``.
"""

from __future__ import annotations

import argparse

import uvicorn

from serving.settings import get_settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m serving", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=None, help="listen address (default NEWSROOM_SERVING_HOST)")
    parser.add_argument("--port", type=int, default=None, help="listen port (default NEWSROOM_SERVING_PORT)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    settings = get_settings()
    uvicorn.run("serving.app:create_app", factory=True, log_level=args.log_level,
                host=settings.host if args.host is None else args.host,
                port=settings.port if args.port is None else args.port)


if __name__ == "__main__":
    main()
