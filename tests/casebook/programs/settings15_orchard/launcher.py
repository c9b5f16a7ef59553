"""Child-process launching for the survey pipeline. The decoder children get the trainer's environment plus
the site's bytecode policy ([decoder] bytecode_cache):

    alongside   bytecode caches next to the sources (the images ship them precompiled); never written
    scratch     bytecode cache under the run's scratch directory (PYTHONPYCACHEPREFIX), so that the shared,
                read-only code mount stays clean; never written either
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def decoder_env(bytecode_cache, scratch):
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPYCACHEPREFIX", None)
    if bytecode_cache == "scratch":
        prefix = os.path.join(scratch, "bytecode")
        os.makedirs(prefix, exist_ok=True)
        env["PYTHONPYCACHEPREFIX"] = prefix
    elif bytecode_cache != "alongside":
        raise ValueError(f"unknown bytecode_cache {bytecode_cache!r}")
    return env


class ShardDecoder:
    def __init__(self, bytecode_cache, scratch):
        self.env = decoder_env(bytecode_cache, scratch)
        self.proc = None

    def decode(self, src, dst):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "decode_shard.py"), src, dst],
                                     env=self.env, stdin=subprocess.DEVNULL)
        rc = self.proc.wait()
        self.proc = None
        if rc != 0:
            raise RuntimeError(f"decoder exited with {rc} on {src}")

    def kill(self):
        p = self.proc
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                p.kill()
