"""``python -m experiments.whatif QUESTION ...``: the what-if command (experiments/whatif/__init__.py)."""

import sys

from experiments.whatif import main

sys.exit(main())
