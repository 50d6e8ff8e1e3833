"""``python -m serving``: run the API and reader page with uvicorn on the configured host and port.

``--host`` and ``--port`` override ``NEWSROOM_SERVING_HOST`` / ``NEWSROOM_SERVING_PORT``.
"""

from __future__ import annotations

import argparse
import sys
from types import FrameType
from typing import Any

import uvicorn
from pydantic import ValidationError

from serving.settings import ServingSettings, get_settings
from warehouse.settings import WarehouseSettings, check_settings, describe_settings_error
from warehouse.store import check_store_settings

SHUTDOWN_GRACE_SECONDS = 5
"""On SIGTERM uvicorn waits this long for responses in flight, then closes what is left, and then runs
the shutdown that writes the buffered clicks."""


class LiveServer(uvicorn.Server):
    """uvicorn's server, ending the app's live streams as soon as it is told to stop (issue 30).

    A live stream never ends on its own, and uvicorn waits for open responses before it shuts down:
    without this, every stop would wait out the grace period and then cancel the streams.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        app: Any = getattr(self.config, "loaded_app", None)
        for _ in range(8):  # through uvicorn's middleware to the FastAPI app
            hub = getattr(getattr(app, "state", None), "live", None)
            if hub is not None:
                hub.close_streams()
                break
            app = getattr(app, "app", None)
        super().handle_exit(sig, frame)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m serving", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=None, help="listen address (default NEWSROOM_SERVING_HOST)")
    parser.add_argument("--port", type=int, default=None, help="listen port (default NEWSROOM_SERVING_PORT)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    try:
        # Every setting is read now: a bad one stops the server at start with one line, exit 2 (#16).
        settings = get_settings()
        check_store_settings(check_settings(WarehouseSettings))
    except ValidationError as e:
        sys.stderr.write(f"newsroom serve: {describe_settings_error(ServingSettings, e)}\n")
        raise SystemExit(2) from None
    except ValueError as e:
        sys.stderr.write(f"newsroom serve: {e}\n")
        raise SystemExit(2) from None
    config = uvicorn.Config("serving.app:create_app", factory=True, log_level=args.log_level,
                            host=settings.host if args.host is None else args.host,
                            port=settings.port if args.port is None else args.port,
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS)
    server = LiveServer(config)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:  # as uvicorn.run: a server that could not start (a port taken) exits non-zero
        raise SystemExit(3)


if __name__ == "__main__":
    main()
