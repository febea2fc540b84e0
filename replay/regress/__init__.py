"""memseal.replay.regress: a recorded run made again, in CI, on top of its evidence.

``regress.py`` re-executes a bundle's calls against today's code and reports
what changed, ``replayer.py`` serves a bundle's recorded results to an agent
(:class:`Replayer`), ``_reexec.py`` holds the cursor map both share (their
entries come from :mod:`memseal.replay.evidence.source`),
``_update.py`` re-records a bundle (``memseal replay --update``) and
``pytest_plugin.py`` is the pytest plugin. Nothing below imports this floor.
"""

from .regress import RegressReport, regress
from .replayer import Replayer, ReplayRun

__all__ = ["RegressReport", "ReplayRun", "Replayer", "regress"]
