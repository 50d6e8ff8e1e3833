"""The reader web page: static HTML, JS and CSS that render the same JSON the API serves."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    # Story images are hot-linked from publishers, some of which still serve plain http.
    "img-src 'self' https: http:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

router = APIRouter(tags=["reader"])


FAVICON_CACHE_CONTROL = "public, max-age=86400"
"""The icon changes with a release at most; a day in any cache is fine."""


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    # no-cache: revalidate every time (cheap: FileResponse sends an ETag) so a deploy shows at once.
    return FileResponse(
        STATIC_DIR / "index.html",
        media_type="text/html",
        headers={"Cache-Control": "no-cache", "Content-Security-Policy": CONTENT_SECURITY_POLICY},
    )


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> FileResponse:
    """Browsers and feed readers ask for ``/favicon.ico`` whatever the page links (it 404ed)."""
    return FileResponse(STATIC_DIR / "favicon.ico", media_type="image/vnd.microsoft.icon",
                        headers={"Cache-Control": FAVICON_CACHE_CONTROL})
