"""Run logging for the picking pipeline.

Everything goes to one run log (the console stays for progress lines).  In
"always" mode every warning occurrence is kept, so a station that repeatedly
produces bad windows shows up with its full count in the log review.
"""
import atexit
import logging
import os
import shutil
import tempfile
import warnings


def setup_run_logging(warning_mode="always"):
    run_dir = tempfile.mkdtemp(prefix="seismic_run_")
    atexit.register(shutil.rmtree, run_dir, True)
    handler = logging.FileHandler(os.path.join(run_dir, "run.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    warnings.simplefilter(warning_mode)
    return run_dir
