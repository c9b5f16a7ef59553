"""Process environment for the job, applied before anything else is imported (tqdm, like several of our
libraries, reads its TQDM_* overrides once, when it is imported).

    console   run from the ops console: progress bars repaint on every update (TQDM_MININTERVAL=0) so the
              console's status pane never looks frozen
    batch     scheduled runs: bars repaint at most every 2 s
"""
import os

PROFILES = {
    "console": {"TQDM_MININTERVAL": "0", "TQDM_NCOLS": "96", "PYTHONIOENCODING": "utf-8"},
    "batch": {"TQDM_MININTERVAL": "2", "TQDM_NCOLS": "96", "PYTHONIOENCODING": "utf-8"},
}


def apply(profile):
    for key, value in PROFILES[profile].items():
        os.environ[key] = value
    return PROFILES[profile]
