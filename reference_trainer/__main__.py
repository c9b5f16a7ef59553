"""``python -m reference_trainer``: see reference_trainer/train.py."""

import sys

from reference_trainer.train import main

sys.exit(main())
