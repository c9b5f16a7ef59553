"""Case-insensitive de-duplication of crawl shards with the system sort (sort -f -u): a flash copy in capitals
and a lower-cased re-feed of a story collapse onto one line. The sort runs in a child process with the
collation locale of the dedup settings ([dedup] collation); the rest of its environment is the trainer's."""
import os
import subprocess


def sort_env(collation):
    env = dict(os.environ)
    env["LC_ALL"] = collation
    return env


class ShardDeduper:
    def __init__(self, workdir, collation, memory="32M"):
        self.workdir, self.memory = workdir, memory
        self.env = sort_env(collation)

    def unique_lines(self, path):
        out = subprocess.run(["sort", "-f", "-u", "-S", self.memory, "--parallel=1", "-T", self.workdir, path],
                             env=self.env, stdout=subprocess.PIPE, check=True)
        return out.stdout.decode("utf-8").splitlines()
