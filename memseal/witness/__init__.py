"""memseal.witness: a C2SP tlog-witness for memseal logs (and any C2SP checkpoint log).

A witness follows logs (by origin and log vkey), keeps the latest checkpoint it
cosigned for each, and cosigns a new one only when a consistency proof shows
it extends that one (c2sp.org/tlog-witness, c2sp.org/tlog-cosignature). A
fork or a rollback is refused and the conflicting checkpoint kept as
evidence. See docs/auditing.md.
"""

from .app import create_witness_app, open_witness
from .client import WitnessError, WitnessRelay, WitnessTarget, parse_witness_option
from .protocol import Witness, WitnessRefusal, format_add_checkpoint, parse_add_checkpoint
from .state import WitnessStore, create_witness_key, load_witness_key

__all__ = [
    "Witness",
    "WitnessError",
    "WitnessRefusal",
    "WitnessRelay",
    "WitnessStore",
    "WitnessTarget",
    "create_witness_app",
    "create_witness_key",
    "format_add_checkpoint",
    "load_witness_key",
    "open_witness",
    "parse_add_checkpoint",
    "parse_witness_option",
]
