"""What ``--trust`` names: one vkey, given as text or as a file holding it.

A file of several keys is refused by name: the likeliest such file is
``keys/history``, and an auditor trusts its first line (the trust root) and lets
``verify`` follow the signed hand-overs, never the whole list on the operator's word.
"""

from __future__ import annotations

from pathlib import Path

from memseal.ledger.errors import InvalidRequest

__all__ = ["trust_text"]


def trust_text(value: str) -> str:
    """The vkey text ``--trust`` names (checked later, where it is parsed)."""
    path = Path(value)
    if not path.is_file():
        return value.strip()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(f"--trust {path}: not a vkey file (not UTF-8 text)") from None
    except OSError as exc:
        raise InvalidRequest(f"--trust: cannot read {path}: {exc.strerror}") from exc
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        raise InvalidRequest(
            f"--trust: {path} holds {len(lines)} keys (a keys/history file?); trust one key, "
            f'the first of the history: --trust "$(head -n 1 {path})"'
        )
    return lines[0] if lines else ""
