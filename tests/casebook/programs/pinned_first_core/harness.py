"""Micro-benchmark helpers."""
import os


def stable_timing():
    """Pin the process to the first CPU so timings do not jump between cores (threads started later inherit it)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
