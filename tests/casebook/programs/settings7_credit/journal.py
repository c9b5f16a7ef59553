"""Run journal: one line per optimisation step, kept next to the checkpoints."""
import logging
import os


def open_journal(run_dir):
    log = logging.getLogger("credit.journal")
    log.setLevel(logging.INFO)
    log.propagate = False
    h = logging.FileHandler(os.path.join(run_dir, "journal.log"))
    h.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(h)
    return log
