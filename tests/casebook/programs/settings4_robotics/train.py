#!/usr/bin/env python3
"""On-policy imitation (DAgger) of a reaching controller for a 2-link arm (CPU).

A simulator process (forked) rolls the current policy out in a batch of
2-link-arm environments, labels every visited state with the expert's (a
PD-plus-gravity controller) torques and writes the rollout into shared memory
(simbridge.py).  The learner thread publishes the policy weights, waits for
the rollout made with them, and fits the policy MLP on it (plus a replay of
older rollouts) with Adam; a telemetry thread logs the expert gap.  Progress:
`step N loss X` about once a second.

Run:   python train.py                            (host profile "eco")
       python train.py --host-profile default
"""
import argparse
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from hostprofile import apply_host_profile
from simbridge import R_VER, STOP, W_VER, Bridge

OBS, ACT, HID = 8, 2, 64
N_ENVS, HORIZON = 64, 40
DT, G = 0.02, 9.81


def policy_shapes():
    return [(HID, OBS), (HID,), (HID, HID), (HID,), (ACT, HID), (ACT,)]


def n_params():
    return sum(int(np.prod(s)) for s in policy_shapes())


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS, HID), nn.Tanh(), nn.Linear(HID, HID), nn.Tanh(), nn.Linear(HID, ACT))

    def flat(self):
        return torch.cat([p.detach().reshape(-1) for p in self.net.parameters()]).numpy()

    def forward(self, x):
        return self.net(x)


# ---- simulator process -------------------------------------------------------------------------------------------

def arm_step(q, dq, tau):
    """Two-link planar arm, unit masses and lengths, semi-implicit Euler."""
    c2 = np.cos(q[:, 1])
    m11 = 3 + 2 * c2
    m12 = 1 + c2
    m22 = np.ones_like(c2)
    h = np.sin(q[:, 1])
    cor1 = -h * (2 * dq[:, 0] * dq[:, 1] + dq[:, 1] ** 2)
    cor2 = h * dq[:, 0] ** 2
    g1 = G * (2 * np.cos(q[:, 0]) + np.cos(q[:, 0] + q[:, 1]))
    g2 = G * np.cos(q[:, 0] + q[:, 1])
    rhs1 = tau[:, 0] - cor1 - g1 - 0.1 * dq[:, 0]
    rhs2 = tau[:, 1] - cor2 - g2 - 0.1 * dq[:, 1]
    det = m11 * m22 - m12 * m12
    ddq = np.stack([(m22 * rhs1 - m12 * rhs2) / det, (m11 * rhs2 - m12 * rhs1) / det], 1)
    dq = dq + DT * ddq
    return q + DT * dq, dq


def expert(q, dq, goal):
    g1 = G * (2 * np.cos(q[:, 0]) + np.cos(q[:, 0] + q[:, 1]))
    g2 = G * np.cos(q[:, 0] + q[:, 1])
    return np.stack([g1, g2], 1) + 30 * (goal - q) - 8 * dq


def np_policy(w, obs):
    shapes, out, i = policy_shapes(), [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(w[i:i + n].reshape(s))
        i += n
    w1, b1, w2, b2, w3, b3 = out
    h = np.tanh(obs @ w1.T + b1)
    h = np.tanh(h @ w2.T + b2)
    return h @ w3.T + b3


def observe(q, dq, goal):
    return np.concatenate([np.sin(q), np.cos(q), dq / 5, goal - q], 1).astype(np.float32)


def simulator(bridge, seed):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rng = np.random.default_rng(seed)
    version = 0
    while True:
        version += 1
        if not bridge.wait_for(W_VER, version):
            return
        w = bridge.weights.copy()
        q = rng.uniform(-1.5, 1.5, (N_ENVS, 2))
        dq = np.zeros((N_ENVS, 2))
        goal = rng.uniform(-1.5, 1.5, (N_ENVS, 2))
        out = bridge.rollout
        for t in range(HORIZON):
            obs = observe(q, dq, goal)
            a_exp = expert(q, dq, goal)
            a_pol = np_policy(w, obs) * 20.0
            beta = 0.5 if version < 50 else 0.1          # DAgger mixing
            tau = np.where(rng.random((N_ENVS, 1)) < beta, a_exp, a_pol)
            out[t, :, :OBS] = obs
            out[t, :, OBS:] = a_exp / 20.0
            q, dq = arm_step(q, dq, tau + rng.normal(0, 0.5, tau.shape))
        bridge.ctrl[R_VER] = version


# ---- learner -----------------------------------------------------------------------------------------------------

def learner(bridge, stop, args, stats):
    torch.manual_seed(args.seed)
    policy = Policy()
    opt = torch.optim.Adam(policy.parameters(), lr=args.lr)
    replay = []
    step, ema, last, last_step = 0, None, time.time(), 0
    while not stop.is_set():
        bridge.weights[:] = policy.flat()
        bridge.ctrl[W_VER] = step + 1
        if not bridge.wait_for(R_VER, step + 1, stop):
            break
        roll = torch.from_numpy(bridge.rollout.reshape(-1, OBS + ACT).copy())
        replay.append(roll)
        replay = replay[-args.replay:]
        data = torch.cat(replay)
        for _ in range(args.updates):
            idx = torch.randint(0, len(data), (args.batch,))
            x, y = data[idx, :OBS], data[idx, OBS:]
            loss = F.mse_loss(policy(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        step += 1
        lv = loss.item()
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        stats["loss"] = ema
        with torch.no_grad():
            stats["gap"] = float((policy(roll[:, :OBS]) - roll[:, OBS:]).abs().mean())
        now = time.time()
        if now - last >= 1.0:
            print(f"step {step} loss {ema:.4f} steps/s={(step - last_step) / (now - last):.2f}", flush=True)
            last, last_step = now, step


def telemetry(stop, stats, path):
    with open(path, "a") as f:
        while not stop.wait(2.0):
            f.write(f"{time.time():.1f} loss={stats.get('loss')} gap={stats.get('gap')}\n")
            f.flush()


def main():
    ap = argparse.ArgumentParser(description="DAgger for a 2-link arm")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--updates", type=int, default=4)
    ap.add_argument("--replay", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--host-profile", default="eco", choices=("eco", "default"))
    ap.add_argument("--telemetry", default=os.devnull)
    args = ap.parse_args()
    slack = apply_host_profile(args.host_profile)
    print(f"host profile {args.host_profile} (timer slack {slack} ns)", flush=True)
    torch.set_num_threads(1)

    ctx = mp.get_context("fork")
    bridge = Bridge(ctx, n_params(), (HORIZON, N_ENVS, OBS + ACT))
    sim = ctx.Process(target=simulator, args=(bridge, args.seed + 1), name="arm-sim", daemon=True)
    sim.start()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    stats = {}
    threads = [threading.Thread(target=learner, args=(bridge, stop, args, stats), name="learner", daemon=True),
               threading.Thread(target=telemetry, args=(stop, stats, args.telemetry), name="telemetry",
                                daemon=True)]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)
    bridge.ctrl[STOP] = 1
    for t in threads:
        t.join(timeout=1.5)
    sim.join(timeout=2)
    if sim.is_alive():
        sim.terminate()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
