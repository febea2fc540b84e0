"""The PostgreSQL adapter's statement text: ``?`` placeholders made psycopg's ``%s``, and
which statements a pipeline may send without waiting for their answer.

Kept apart from the adapter (``postgres.py``) because both are pure functions of the SQL
text, cached per statement, and tested on their own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["sends_ahead", "translate_placeholders", "upsert_runs"]

_CONFLICT = re.compile(r"ON CONFLICT \(([^)]*)\) DO UPDATE", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
def translate_placeholders(query: str) -> str:
    """``?`` placeholders to psycopg's ``%s`` (see the module docstring for the rules)."""
    out: list[str] = []
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in "'\"":  # a string or a quoted identifier ('' and "" escape themselves)
            end = query.find(c, i + 1)
            while end != -1 and end + 1 < n and query[end + 1] == c:
                end = query.find(c, end + 2)
            end = n if end == -1 else end + 1
            out.append(query[i:end].replace("%", "%%"))
            i = end
        elif c == "-" and query.startswith("--", i):
            end = query.find("\n", i)
            end = n if end == -1 else end
            out.append(query[i:end].replace("%", "%%"))
            i = end
        elif c == "/" and query.startswith("/*", i):
            end = query.find("*/", i + 2)
            end = n if end == -1 else end + 2
            out.append(query[i:end].replace("%", "%%"))
            i = end
        elif c == "$" and (tag := _dollar_tag(query, i)) is not None:
            end = query.find(tag, i + len(tag))
            end = n if end == -1 else end + len(tag)
            out.append(query[i:end].replace("%", "%%"))
            i = end
        elif c == "?":
            out.append("%s")
            i += 1
        elif c == "%":
            out.append("%%")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _dollar_tag(query: str, i: int) -> str | None:
    # $$ or $tag$ opens a dollar-quoted string; $1 (a positional parameter) does not.
    if i > 0 and (query[i - 1].isalnum() or query[i - 1] == "_"):
        return None
    j = i + 1
    while j < len(query) and (query[j].isalnum() or query[j] == "_"):
        j += 1
    if j < len(query) and query[j] == "$" and not query[i + 1 : j][:1].isdigit():
        return query[i : j + 1]
    return None


@functools.lru_cache(maxsize=1024)
def sends_ahead(query: str) -> bool:
    """Whether a statement returns no rows, so the pipeline need not wait for it."""
    words = query.lstrip().split(None, 1)
    return (
        bool(words)
        and words[0].upper() in ("INSERT", "UPDATE", "DELETE")
        and "RETURNING" not in query.upper()
    )


def upsert_runs(
    into: str, tail: str, rows: Sequence[tuple[Any, ...]]
) -> Iterator[Sequence[tuple[Any, ...]]]:
    """``rows`` in runs, in order, none meeting a conflict key twice: the statements
    of an upsert (``tail`` ``ON CONFLICT (...) DO UPDATE``) into ``into`` (``table (col,
    ...)``) that give what the rows one by one would. PostgreSQL refuses a statement
    updating one row twice; any other ``tail`` is one run."""
    found = _CONFLICT.search(tail)
    if found is None:
        yield rows
        return
    columns = [c.strip() for c in into[into.index("(") + 1 : into.rindex(")")].split(",")]
    key = [columns.index(c.strip()) for c in found.group(1).split(",")]
    start, seen = 0, set[tuple[Any, ...]]()
    for i, row in enumerate(rows):
        k = tuple(row[j] for j in key)
        if k in seen:
            yield rows[start:i]
            start, seen = i, set()
        seen.add(k)
    yield rows[start:]
