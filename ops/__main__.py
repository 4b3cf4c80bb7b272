"""``python -m ops``: see ``ops.cli``."""

import sys

from ops.cli import main

sys.exit(main())
