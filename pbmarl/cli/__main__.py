"""``python -m pbmarl.cli``: the `pbmarl` command."""

import sys

from pbmarl.cli import main

sys.exit(main())
