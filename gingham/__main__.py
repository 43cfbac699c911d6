"""``python -m gingham ...`` is the ``gingham`` command (for machines without the script)."""

import sys

from .cli import main

sys.exit(main())
