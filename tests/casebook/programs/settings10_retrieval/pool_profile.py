"""Tuning of the sorted candidate pools (sortedcontainers), applied once at start-up, before any pool is built.

SortedList keeps its items in sublists of about DEFAULT_LOAD_FACTOR items each (library default 1000). The
'interactive' profile was copied from the online miner service, where small sublists were meant to keep each
insert's list shifting short; 'batch' keeps the library's default.
"""
from sortedcontainers import SortedKeyList, SortedList

LOAD_FACTORS = {"interactive": 16, "batch": 1000}


def apply(profile):
    load = LOAD_FACTORS[profile]
    SortedList.DEFAULT_LOAD_FACTOR = load       # SortedKeyList and SortedSet read it through SortedList
    return load


def new_pool(key):
    return SortedKeyList(key=key)
