"""``python -m memseal.cli``: the ``memseal`` command."""

import sys

from memseal.cli.main import main

sys.exit(main())
