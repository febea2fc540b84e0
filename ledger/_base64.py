"""Canonical base64, as the C2SP text formats (notes, checkpoints, proofs) carry it."""

from __future__ import annotations

import base64
import binascii

__all__ = ["b64decode", "b64encode"]


def b64decode(text: str) -> bytes | None:
    """Standard padded base64, canonical only, or None.

    Re-encoding and comparing rejects what a lenient decoder lets through
    (stray newlines, non-zero padding bits), so each value has one spelling.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != text:
        return None
    return raw


def b64encode(raw: bytes) -> str:
    """Standard padded base64: the one spelling :func:`b64decode` accepts back."""
    return base64.b64encode(raw).decode("ascii")
