"""``python -m georag.cli``: the ``georag`` command."""

import sys

from georag.cli import main

sys.exit(main())
