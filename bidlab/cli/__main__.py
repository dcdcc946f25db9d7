"""``python -m bidlab.cli ...``: the ``bidlab`` command."""

import sys

from bidlab.cli import main

sys.exit(main())
