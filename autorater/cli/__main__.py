"""``python -m autorater.cli``: the ``autorater`` command."""

import sys

from autorater.cli import main

sys.exit(main())
