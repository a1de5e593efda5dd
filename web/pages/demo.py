"""The one-page chat demo at `/`: static HTML and ES5 JavaScript over the events long-poll."""

from __future__ import annotations

from flask import Blueprint, Response

bp = Blueprint("demo", __name__, static_folder="static", static_url_path="/demo")

# Scripts and styles come only from our own files; XHR only to our own origin.
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)


@bp.get("/")
def page() -> Response:
    """The chat demo page; it needs no key to load (it asks for one)."""
    response = bp.send_static_file("demo.html")
    response.headers["Content-Security-Policy"] = _CSP
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.after_request
def _no_sniff(response: Response) -> Response:
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
