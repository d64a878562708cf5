"""``python -m shiftbench.cli``."""

import sys

from . import main

sys.exit(main())
