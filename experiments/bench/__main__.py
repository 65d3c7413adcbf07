"""``python -m experiments.bench``: the speed bench (experiments/bench/__init__.py)."""

import sys

from experiments.bench import main

sys.exit(main())
