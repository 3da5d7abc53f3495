"""``python -m autorater.app.cli``: the ``autorater`` command."""

import sys

from autorater.app.cli import main

sys.exit(main())
