"""`python -m sparkctl` runs the CLI."""

import sys

from sparkctl.cli import main

sys.exit(main())
