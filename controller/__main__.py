"""``python -m controller`` entry point (see :mod:`controller.cli.main`)."""

import sys

from controller.cli.main import main

sys.exit(main())
