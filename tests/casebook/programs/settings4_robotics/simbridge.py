"""Shared-memory bridge between the learner and the simulator process.

Layout: a small int64 control block (weights version, rollout version, stop
flag) and two float32 buffers (policy weights, rollout).  Each side polls the
other's version counter; polling with a short sleep keeps the bridge free of
OS-level semaphores, so either side can be restarted independently.
"""
import time

import numpy as np

W_VER, R_VER, STOP = 0, 1, 2
POLL_S = 0.0005


class Bridge:
    def __init__(self, ctx, n_weights, rollout_shape):
        self.ctrl_raw = ctx.RawArray("q", 4)
        self.w_raw = ctx.RawArray("f", n_weights)
        self.r_raw = ctx.RawArray("f", int(np.prod(rollout_shape)))
        self.rollout_shape = rollout_shape
        self.attach()

    def attach(self):
        self.ctrl = np.frombuffer(self.ctrl_raw, np.int64)
        self.weights = np.frombuffer(self.w_raw, np.float32)
        self.rollout = np.frombuffer(self.r_raw, np.float32).reshape(self.rollout_shape)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k in ("ctrl_raw", "w_raw", "r_raw", "rollout_shape")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.attach()

    def wait_for(self, idx, value, stop=None):
        ctrl = self.ctrl
        while ctrl[idx] < value:
            if ctrl[STOP] or (stop is not None and stop.is_set()):
                return False
            time.sleep(POLL_S)
        return True
