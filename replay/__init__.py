"""memseal.replay: durable runs, whose every tool call is a signed entry with a memo.

Three floors, imports one way (docs/design.md): :mod:`.runs` (a run and its
memos) <- :mod:`.evidence` (bundles, read proofs, the past as of a point) <-
:mod:`.regress` (a recorded run made again in CI). See docs/replay.md. Public
names are re-exported here; modules whose names start with ``_`` are internal.
"""

import importlib as _importlib
import sys as _sys
import types as _types
from importlib import abc as _abc
from importlib import machinery as _machinery

from .evidence import (
    BUNDLE_FORMAT,
    READ_PROOF_FORMAT,
    Bundle,
    ReadProof,
    ReadProofError,
    VerifiedBundle,
    VerifiedRead,
    decode_bundle,
    encode_bundle,
    export_bundle,
    prove_read,
    prove_read_from_bundle,
    verify_bundle,
    verify_read,
)
from .regress import RegressReport, Replayer, ReplayRun, regress
from .runs import (
    MODES,
    RUN_FORKED,
    RUN_STARTED,
    TOOL_CALL,
    Change,
    Mode,
    Prepared,
    Preparer,
    Run,
    RunForked,
    RunStarted,
    ScopeIdentity,
    ToolCall,
    Verified,
    check_memo,
    fingerprint,
    input_hash,
    memo_key,
    new_run_id,
    split_result,
)

__all__ = [
    "BUNDLE_FORMAT",
    "MODES",
    "READ_PROOF_FORMAT",
    "RUN_FORKED",
    "RUN_STARTED",
    "TOOL_CALL",
    "Bundle",
    "Change",
    "Mode",
    "Prepared",
    "Preparer",
    "ReadProof",
    "ReadProofError",
    "RegressReport",
    "ReplayRun",
    "Replayer",
    "Run",
    "RunForked",
    "RunStarted",
    "ScopeIdentity",
    "ToolCall",
    "Verified",
    "VerifiedBundle",
    "VerifiedRead",
    "check_memo",
    "decode_bundle",
    "encode_bundle",
    "export_bundle",
    "fingerprint",
    "input_hash",
    "memo_key",
    "new_run_id",
    "prove_read",
    "prove_read_from_bundle",
    "regress",
    "split_result",
    "verify_bundle",
    "verify_read",
]


# -- the public modules' names from before the floors ------------------------------------
#
# ``memseal.replay.bundle`` and the other public modules moved onto the floors (issue 40).
# Hosts import them by their old names too: each old name is the moved module itself,
# imported only when asked for (``pytest_plugin`` imports pytest, which a host need not
# have), so ``memseal.replay.bundle.export_bundle is memseal.replay.evidence.bundle...``.

_MOVED: dict[str, str] = {
    "run": "runs.run",
    "calls": "runs.calls",
    "identity": "runs.identity",
    "memo": "runs.memo",
    "provenance": "runs.provenance",
    "results": "runs.results",
    "divergence": "runs.divergence",
    "bundle": "evidence.bundle",
    "read_proof": "evidence.read_proof",
    "regress": "regress.regress",
    "replayer": "regress.replayer",
    "pytest_plugin": "regress.pytest_plugin",
}

#: The as-of views left replay for memseal.apps (issue 40): their old names, under
#: this package, and the module each is now. Names, never imports: replay imports
#: nothing above it.
_LIFTED: dict[str, str] = {
    "as_of": "memseal.apps.as_of",
    "evidence.as_of": "memseal.apps.as_of",
}


class _MovedLoader(_abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target
        self._spec: _machinery.ModuleSpec | None = None

    def create_module(self, spec: _machinery.ModuleSpec) -> _types.ModuleType:
        module = _importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: _types.ModuleType) -> None:
        # The module ran under its own name; the import machinery has just put the
        # old name's spec on it, and its own spec goes back.
        module.__spec__ = self._spec


class _MovedFinder(_abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> _machinery.ModuleSpec | None:
        if not fullname.startswith(__name__ + "."):
            return None
        name = fullname[len(__name__) + 1 :]
        if name in _LIFTED:
            return _machinery.ModuleSpec(fullname, _MovedLoader(_LIFTED[name]))
        # "regress" is both a floor and the old module: the floor (a package) wins.
        if name not in _MOVED or name == "regress":
            return None
        return _machinery.ModuleSpec(fullname, _MovedLoader(f"{__name__}.{_MOVED[name]}"))


if not any(isinstance(finder, _MovedFinder) for finder in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedFinder())
