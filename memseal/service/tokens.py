"""Service tokens: random bearer tokens bound to a role and a scope, stored hashed.

A token is ``ms_`` and 43 URL-safe characters (32 random bytes); it is shown
once, when made. What is stored, in ``tokens.db`` beside the ledger in the
data folder, is its SHA-256, the role (agent, auditor, admin) and the scope
fields of a :class:`~memseal.tools.ToolScope`. A request presents the token;
the service hashes it, finds the row by that hash and compares the hashes
again with :func:`hmac.compare_digest`. Nothing in a request can change a
token's role or scope; a revoked token is refused from the next request on
(the table is read on every request, so ``memseal tokens revoke`` works while
the service runs).

An admin's reach bounds what it may do with tokens (:func:`manages`,
:func:`check_mint`): it lists and revokes only tokens placed at or below its
own place and inside its reach, and mints only tokens placed there that are no
wider than itself in any scope field. The root admin (place ``/``, reach every
namespace) is the only one that manages every token. ``memseal tokens`` acts
as the operator and is not bounded.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from memseal.engine import Namespace, Reach
from memseal.engine.trust import trust_rank
from memseal.ledger._files import private_database
from memseal.ledger.errors import InvalidRequest, NotFound, Unsupported
from memseal.ledger.keys import secure_folder
from memseal.tools import ToolScope

__all__ = [
    "ROLES",
    "TOKENS_FILE",
    "OutsideReach",
    "Principal",
    "Role",
    "TokenInfo",
    "TokenStore",
    "check_mint",
    "manages",
    "parse_reach",
    "reach_text",
    "role_token",
    "scope_from",
]

TOKENS_FILE: Final = "tokens.db"
Role = Literal["agent", "auditor", "admin"]
ROLES: Final[tuple[Role, ...]] = ("agent", "auditor", "admin")
MAX_TOKEN_CHARS: Final = 200
MAX_LABEL_CHARS: Final = 200

_DDL = """
CREATE TABLE IF NOT EXISTS tokens (
    id            TEXT PRIMARY KEY,
    hash          BLOB NOT NULL UNIQUE,
    role          TEXT NOT NULL,
    place         TEXT NOT NULL,
    reach         TEXT,
    writes        INTEGER NOT NULL,
    floor         TEXT NOT NULL,
    default_trust TEXT NOT NULL,
    frozen        INTEGER NOT NULL,
    allowlist     TEXT,
    label         TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    revoked_at    TEXT
);
"""


def role_token(role: str) -> str:
    """``an agent token``, ``an auditor token``: the role with its article, for messages."""
    return f"{'an' if role[:1] in 'aeiou' else 'a'} {role} token"


def parse_reach(text: str | None, place: str, role: str) -> Reach | None:
    """``of:NS``, ``subtree:NS``, ``exact:NS`` or ``all``; None gives the role's default.

    Agents default to ``of:PLACE`` (the place and its ancestors), auditors and
    admins to ``subtree:PLACE`` (everything below the place).
    """
    if text is None:
        return Reach.of(place) if role == "agent" else Reach.subtree(place)
    if text == "all":
        return None
    mode, sep, node = text.partition(":")
    if not sep or mode not in ("of", "subtree", "exact"):
        raise InvalidRequest("`reach` must be of:NS, subtree:NS, exact:NS or all")
    node = "" if node == "/" else node
    if mode == "of":
        return Reach.of(node)
    if mode == "subtree":
        return Reach.subtree(node)
    return Reach.exact(node)


def reach_text(reach: Reach | None) -> str:
    """A reach as :func:`parse_reach` reads it: ``MODE:NODE``, or ``all``."""
    return "all" if reach is None else f"{reach.mode}:{reach.node}"


class OutsideReach(Unsupported):
    """An admin asked to make a token outside its reach or wider than itself (HTTP 403)."""


def _shown(namespace: str) -> str:
    return namespace or "/"


def manages(admin: ToolScope, place: str) -> bool:
    """Whether an admin of scope ``admin`` manages tokens placed at ``place``.

    The place must be at or below the admin's own place (whole path segments:
    ``team:acme`` does not hold ``team:acme-corp``) and inside its reach; so
    only an admin placed at the root with every namespace in reach manages all.
    """
    ns = Namespace(place, field="place")
    inside_place = Namespace(admin.place).contains(ns)
    return inside_place and (admin.reach is None or admin.reach.admits(ns))


def _beyond(inner: Reach | None, outer: Reach | None) -> str | None:
    """Something ``inner`` reaches that ``outer`` does not, in words; None if none.

    Reaches are compared as the sets of namespaces they admit: ``of:N`` is N and
    its ancestors up to the root, ``subtree:N`` N and everything below it.
    """
    if outer is None or (outer.mode == "subtree" and not outer.node):
        return None
    if inner is None or (inner.mode == "subtree" and not inner.node):
        return "every namespace"
    if inner.mode == "of":
        for ancestor in Namespace(inner.node).ancestors():
            if not outer.admits(ancestor):
                return _shown(ancestor.text)
        return None
    if not outer.admits(inner.node):
        return _shown(inner.node)
    if inner.mode == "subtree" and not (
        outer.mode == "subtree" and Namespace(outer.node).contains(Namespace(inner.node))
    ):
        # Below any node there are namespaces (only depth limits them): an exact or
        # ancestors' reach never holds a whole subtree.
        return f"the namespaces below {inner.node}"
    return None


def _cannot_write(scope: ToolScope) -> bool:
    return not scope.writes or scope.frozen


def check_mint(admin: ToolScope, role: str, scope: ToolScope) -> None:
    """Refuse (:class:`OutsideReach`) a token an admin of scope ``admin`` may not make.

    1. The token is placed where the admin manages (:func:`manages`).
    2. Its reach admits no namespace the admin's reach does not.
    3. It may write only if the admin may (``writes`` and not ``frozen``).
    4. Its floor is not below the admin's (``default_trust`` is at least the
       floor already, and reads never go below the floor).
    5. Its tools are among the admin's allowlist, if the admin has one.
    Any role may be made: the role decides which routes a token uses, its scope
    how far it reaches there, and that scope is what the steps above bound.
    """
    if role not in ROLES:
        raise InvalidRequest(f"`role` {role!r} is not one of {', '.join(ROLES)}")
    mine = f"this admin (place {_shown(admin.place)}, reach {reach_text(admin.reach)})"
    # 1. Where the token is placed.
    if not manages(admin, scope.place):
        raise OutsideReach(
            f"`place` {_shown(scope.place)} is outside the reach of {mine}: an admin makes "
            "tokens only at or below its own place, inside its reach"
        )
    # 2. What the token reaches.
    beyond = _beyond(scope.reach, admin.reach)
    if beyond is not None:
        hint = f"; e.g. subtree:{scope.place}" if scope.place else ""
        raise OutsideReach(
            f"`reach` {reach_text(scope.reach)} reaches {beyond}, outside the reach of "
            f"{mine}: a token is never wider than the admin that makes it{hint}"
        )
    # 3. Whether it writes.
    if _cannot_write(admin) and not _cannot_write(scope):
        raise OutsideReach(
            f"`read_only`: {mine} cannot write (read-only or frozen), so the tokens it "
            "makes cannot either"
        )
    # 4. How little trust it may read.
    if trust_rank(scope.floor) < trust_rank(admin.floor):
        raise OutsideReach(f"`floor` {scope.floor} is below the floor {admin.floor} of {mine}")
    # 5. Which tools it is offered.
    if admin.allowlist is not None:
        if scope.allowlist is None:
            raise OutsideReach(
                f"`allow` is required: {mine} is limited to {','.join(admin.allowlist)}"
            )
        extra = [name for name in scope.allowlist if name not in admin.allowlist]
        if extra:
            raise OutsideReach(
                f"`allow`: {','.join(extra)} not among the tools of {mine} "
                f"({','.join(admin.allowlist)})"
            )


def scope_from(
    *,
    role: str,
    place: str,
    reach: str | None = None,
    read_only: bool = False,
    floor: str = "unverified",
    default_trust: str | None = None,
    frozen: bool = False,
    allow: list[str] | None = None,
) -> ToolScope:
    """A token's scope from the options of ``memseal tokens add`` (or POST /v1/admin/tokens)."""
    if role not in ROLES:
        raise InvalidRequest(f"`role` {role!r} is not one of {', '.join(ROLES)}")
    place = "" if place in ("/", "root") else place
    scope = ToolScope.placed_at(place) if place else ToolScope()
    return scope.replace(
        reach=parse_reach(reach, scope.place, role),
        writes=not read_only,
        floor=floor,
        default_trust=default_trust if default_trust is not None else floor,
        frozen=frozen,
        allowlist=None if allow is None else tuple(allow),
    )


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is: the token's id, role and scope (fixed when the token was made)."""

    token_id: str
    role: Role
    scope: ToolScope
    label: str = ""


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed (never the token itself)."""

    id: str
    role: str
    place: str
    reach: str
    writes: bool
    floor: str
    default_trust: str
    frozen: bool
    allowlist: list[str] | None
    label: str
    created_at: str
    revoked_at: str | None

    def as_dict(self) -> dict[str, Any]:
        """The listing as JSON fields."""
        return {name: getattr(self, name) for name in self.__slots__}


class TokenStore:
    """The token table of one data folder (``tokens.db``); safe across threads and processes."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        secure_folder(folder)
        self.path = folder / TOKENS_FILE
        # 0600 before SQLite opens it: its -wal and -shm get the same mode.
        private_database(self.path)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._conn.executescript(_DDL)

    def close(self) -> None:
        """Close the table's connection."""
        with self._lock:
            self._conn.close()

    def add(
        self,
        role: str,
        scope: ToolScope,
        *,
        label: str = "",
    ) -> tuple[str, TokenInfo]:
        """Make a token; returns (the token, shown this once; its listing)."""
        if role not in ROLES:
            raise InvalidRequest(f"`role` {role!r} is not one of {', '.join(ROLES)}")
        if not isinstance(label, str) or len(label) > MAX_LABEL_CHARS or not label.isprintable():
            raise InvalidRequest(f"`label` must be up to {MAX_LABEL_CHARS} printable characters")
        token = "ms_" + secrets.token_urlsafe(32)
        token_id = "tok-" + secrets.token_hex(6)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        allow = None if scope.allowlist is None else ",".join(scope.allowlist)
        with self._lock:
            self._conn.execute(
                "INSERT INTO tokens (id, hash, role, place, reach, writes, floor, default_trust,"
                " frozen, allowlist, label, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    token_id,
                    _hash(token),
                    role,
                    scope.place,
                    reach_text(scope.reach),
                    int(scope.writes),
                    scope.floor,
                    scope.default_trust,
                    int(scope.frozen),
                    allow,
                    label,
                    now,
                ),
            )
        info = self.get(token_id)
        return token, info

    def has_admin(self) -> bool:
        """Whether any live admin token exists."""
        with self._lock:
            row = self._conn.execute(
                "SELECT 1 FROM tokens WHERE role = 'admin' AND revoked_at IS NULL LIMIT 1"
            ).fetchone()
        return row is not None

    def get(self, token_id: str) -> TokenInfo:
        """The listing of token ``token_id`` (revoked or not), or :class:`NotFound`."""
        with self._lock:
            row = self._conn.execute(
                "SELECT id, role, place, reach, writes, floor, default_trust, frozen, allowlist,"
                " label, created_at, revoked_at FROM tokens WHERE id = ?",
                (token_id,),
            ).fetchone()
        if row is None:
            raise NotFound(f"no token {token_id!r}")
        return _info(row)

    def listed(self, within: ToolScope | None = None) -> list[TokenInfo]:
        """Every token, or with ``within`` (an admin's scope) those it manages."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, role, place, reach, writes, floor, default_trust, frozen, allowlist,"
                " label, created_at, revoked_at FROM tokens ORDER BY created_at, id"
            ).fetchall()
        infos = [_info(r) for r in rows]
        return infos if within is None else [t for t in infos if manages(within, t.place)]

    def revoke(self, token_id: str, within: ToolScope | None = None) -> TokenInfo:
        """Revoke a token; with ``within`` (an admin's scope) only one it manages.

        A token outside ``within`` gets the same :class:`NotFound` as one that does
        not exist: an admin learns nothing of the ids beyond its reach.
        """
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self._lock:
            row = self._conn.execute(
                "SELECT place FROM tokens WHERE id = ?", (token_id,)
            ).fetchone()
            if row is None or (within is not None and not manages(within, row[0])):
                raise NotFound(f"no token {token_id!r}")
            self._conn.execute(
                "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now, token_id),
            )
        return self.get(token_id)

    def authenticate(self, token: str) -> Principal | None:
        """The principal of a live token, or None (unknown, revoked or malformed)."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        digest = _hash(token)
        with self._lock:
            row = self._conn.execute(
                "SELECT hash, id, role, place, reach, writes, floor, default_trust, frozen,"
                " allowlist, label FROM tokens WHERE hash = ? AND revoked_at IS NULL",
                (digest,),
            ).fetchone()
        if row is None or not hmac.compare_digest(bytes(row[0]), digest):
            return None
        _, token_id, role, place, reach, writes, floor, default_trust, frozen, allow, label = row
        scope = ToolScope(
            place=place,
            reach=parse_reach(reach, place, role),
            writes=bool(writes),
            floor=floor,
            default_trust=default_trust,
            frozen=bool(frozen),
            allowlist=None if allow is None else tuple(a for a in allow.split(",") if a),
        )
        return Principal(token_id=token_id, role=role, scope=scope, label=label)


def _info(row: tuple[Any, ...]) -> TokenInfo:
    return TokenInfo(
        id=row[0],
        role=row[1],
        place=row[2],
        reach=row[3],
        writes=bool(row[4]),
        floor=row[5],
        default_trust=row[6],
        frozen=bool(row[7]),
        allowlist=None if row[8] is None else [a for a in row[8].split(",") if a],
        label=row[9],
        created_at=row[10],
        revoked_at=row[11],
    )
