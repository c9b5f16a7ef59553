"""``python -m reference_trainer``: see reference_trainer/cli.py."""

import sys

from reference_trainer.cli import main

sys.exit(main())
