"""URL helpers: what is a URL, and the one credential stripper for everything we show."""

from __future__ import annotations

import re

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
# user:password@ after a scheme, and a query string (signed URLs and tokens ride there)
_SECRETS = re.compile(r"(?<=://)[^/\s@]+@|\?[^\s'\"]*")


def is_url(path: str | None) -> bool:
    return bool(path) and bool(_URL.match(path)) and not path.startswith("file://")


def public(url: str) -> str:
    """The URL without user:password@ or a query string (tokens): safe to show and to hash."""
    scheme, _, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    host = host.rpartition("@")[2]
    return f"{scheme}://{host}{slash}{path.split('?')[0].split('#')[0]}"


def redact(text: str) -> str:
    """Free text (an exception's message) with every URL's credentials and query removed."""
    return _SECRETS.sub("", text)
