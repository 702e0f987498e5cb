"""`python -m jobrunner`: the same as the `jobrunner` script."""

import sys

from jobrunner.cli import main

sys.exit(main())
