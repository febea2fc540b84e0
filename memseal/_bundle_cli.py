"""Command-line verbs of session bundles (export, replay); filled by their issue."""

from __future__ import annotations

import argparse

__all__ = ["add_verbs"]


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this module's verbs to the ``memseal`` parser (none yet)."""
