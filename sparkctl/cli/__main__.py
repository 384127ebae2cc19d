"""`python -m sparkctl.cli` (the tests' subprocess form of the `sparkctl` script)."""

import sys

from sparkctl.cli import main

sys.exit(main())
