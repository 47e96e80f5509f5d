"""``python -m core.runs ...``: see core.runs.cli."""

import sys

from .cli import main

sys.exit(main())
