"""``python -m controller`` entry point (see :mod:`controller.cli`)."""

import sys

from controller.cli import main

sys.exit(main())
