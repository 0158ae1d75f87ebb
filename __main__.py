"""``python -m fathom …``: the same program as the ``fathom`` command."""

import sys

from fathom.cli import main

sys.exit(main())
