"""``python -m serving``: run the API and reader page with uvicorn on the configured host and port."""

from __future__ import annotations

import uvicorn

from serving.settings import get_settings


def main() -> None:
    settings = get_settings()
    uvicorn.run("serving.app:create_app", factory=True, host=settings.host, port=settings.port)


if __name__ == "__main__":
    main()
