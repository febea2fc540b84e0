"""The ``memseal`` command line: :func:`main` and the verbs' modules.

``main`` (the ``memseal`` console script) parses the arguments and runs one verb;
each module here adds its verbs to the parser: :mod:`.main` the ledger's own
(``verify``, ``checkpoint``, ``prove``, ``keys``, ``demo``), :mod:`.engine`
``rebuild``, :mod:`.bundle` ``export`` and ``replay``, :mod:`.service` ``serve``,
``mcp`` and ``tokens``, :mod:`.migrate` ``migrate``.
"""

from memseal.cli.main import main

__all__ = ["main"]
