import sys

from dflash_diag.cli import main

sys.exit(main())
