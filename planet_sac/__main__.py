"""`python -m planet_sac` is the `planet-sac` command."""

import sys

from planet_sac.cli import main

sys.exit(main())
