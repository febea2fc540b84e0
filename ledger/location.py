"""Where a ledger lives: a data folder (SQLite, the default) or a PostgreSQL URL.

A PostgreSQL store is named by a libpq URI with one parameter of memseal's
own, ``schema``, which holds the ledger's tables (made if missing)::

    postgresql://memseal:secret@db.internal:5432/memory?schema=team_a

Everything else in the URI (host, port, credentials, ``sslmode`` and the
other libpq parameters) goes to the driver unchanged. The keys never live
in the database: the data folder keeps them, whichever store holds the log.

A password never leaves this module in text meant for people:
:attr:`DatabaseUrl.display` shows it as ``***``, and errors about a URL
quote the display form.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import msgspec

from .errors import InvalidRequest

__all__ = ["SCHEMES", "DatabaseUrl", "hide_password", "is_database_url", "parse_database_url"]

SCHEMES: Final = ("postgresql://", "postgres://")
_SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class DatabaseUrl(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed PostgreSQL store location."""

    dsn: str
    """The URI for libpq, without memseal's ``schema`` parameter."""
    schema: str | None
    """The schema holding the tables; None: the role's ``search_path``."""
    display: str
    """The URI with any password shown as ``***`` (for messages and logs)."""


def is_database_url(text: object) -> bool:
    """True for text naming a PostgreSQL store rather than a folder."""
    return isinstance(text, str) and text.startswith(SCHEMES)


def _hide_password(netloc: str) -> str:
    if "@" not in netloc:
        return netloc
    credentials, _, host = netloc.rpartition("@")
    if ":" in credentials:
        user = credentials.split(":", 1)[0]
        return f"{user}:***@{host}"
    return netloc


def parse_database_url(url: str, field: str = "store") -> DatabaseUrl:
    """Split ``url`` into the driver's DSN and memseal's schema; refuse what cannot work."""
    if not is_database_url(url):
        raise InvalidRequest(f"`{field}` must be a postgresql:// URL")
    # user:password@host: an '@' past the first '/', '?' or '#' after the scheme means the
    # user or password holds one of those unencoded, and the URL would be split inside it.
    rest = url.split("://", 1)[1]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    if "@" in rest[cut:] and "@" not in rest[:cut] and ":" in rest.rsplit("@", 1)[0]:
        raise InvalidRequest(
            f"`{field}`: the user or password in the URL holds a '/', '?' or '#'; "
            "percent-encode it (%2F, %3F, %23) or give the password through PGPASSWORD"
        )
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError as exc:
        shown = _hide_password(url.split("/", 3)[2]) if url.count("/") >= 2 else "?"
        raise InvalidRequest(f"`{field}`: malformed URL (host part {shown}): {exc}") from None
    shown_query = urlencode(
        [(k, "***" if k == "password" else v) for k, v in query], quote_via=quote, safe="*"
    )
    display = urlunsplit(
        (parts.scheme, _hide_password(parts.netloc), parts.path, shown_query, parts.fragment)
    )
    if parts.fragment:
        raise InvalidRequest(f"`{field}` {display}: a fragment (#...) means nothing here")
    schemas = [value for key, value in query if key == "schema"]
    if len(schemas) > 1:
        raise InvalidRequest(f"`{field}` {display}: `schema` is given more than once")
    schema = schemas[0] if schemas else None
    if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
        raise InvalidRequest(
            f"`{field}` {display}: schema {schema!r} must be a plain identifier "
            "(letters, digits, underscore; at most 63; not starting with a digit)"
        )
    rest = urlencode([(k, v) for k, v in query if k != "schema"], quote_via=quote)
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
    return DatabaseUrl(dsn=dsn, schema=schema, display=display)


def hide_password(text: str, url: str) -> str:
    """``text`` with the password of ``url`` (as typed and decoded) shown as ``***``.

    For driver messages: libpq quotes pieces of a malformed URL back, the
    password among them.
    """
    found: set[str] = set()
    try:
        parts = urlsplit(url)
        found |= {parts.password or "", unquote(parts.password or "")}
        for piece in parts.query.split("&"):
            key, _, value = piece.partition("=")
            if key == "password":
                found |= {value, unquote(value)}
    except ValueError:
        pass
    # Whatever sits between the user's colon and the last '@' (a password holding an
    # unencoded '/', '?' or '#' is split elsewhere by the URL parser).
    rest = url.split("://", 1)[-1]
    if "@" in rest:
        credentials = rest.rsplit("@", 1)[0]
        if ":" in credentials:
            secret = credentials.split(":", 1)[1]
            found |= {secret, unquote(secret)}
    for secret in sorted((s for s in found if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
