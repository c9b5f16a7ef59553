"""Starts the waveform decoder as a child process and hands back the read end of its stdout pipe.

The capacity of the pipe (the kernel buffer between the decoder and the trainer, fcntl F_SETPIPE_SZ through
subprocess.Popen's pipesize) comes from the job config:

    --pipe-kib 4      one page: the memory-constrained batch queue's setting (bounds what a stalled trainer pins
                      in kernel memory per decoder)
    --pipe-kib 1024   1 MiB (/proc/sys/fs/pipe-max-size): the decoder can run ahead of the trainer by that much
                      (a bit more than one training batch of records)
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def spawn_decoder(pipe_kib, seed):
    cmd = [sys.executable, os.path.join(HERE, "decoder.py"), "--seed", str(seed)]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, bufsize=0,
                            pipesize=pipe_kib * 1024)
