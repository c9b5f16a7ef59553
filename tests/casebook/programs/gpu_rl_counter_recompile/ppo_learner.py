"""PPO on a batch of synthetic environments: an actor thread collects rollouts with the live policy, the learner
thread runs clipped-surrogate updates through a torch.compile'd actor-critic.

Modelled on pytorch/pytorch#115711 ("nn.Module int/float attributes caused re-compile": a counter attribute on the
module is guarded as a constant) and #128319 ("Recompilation on a counter-like attribute of nn module"), and on the
common answer to "torch._dynamo hit config.recompile_limit (8)": raise the limit. The policy's exploration
temperature reads `self.anneal_step`, a Python int the learner sets before every update; the compiled forward (and
its backward) guards on `L['self'].anneal_step == N` and is compiled again for every update.

    python ppo_learner.py                   # anneal_step is a plain int attribute (recompile_limit raised to 4096)
    python ppo_learner.py --step-buffer     # anneal_step is a registered buffer updated in place: two graphs
                                            # (update and bootstrap batch sizes) compiled at start-up, then reused
"""
import argparse
import queue
import threading
import time

import torch
import torch.nn.functional as F
from agent import ActorCritic

OBS, ACTIONS = 96, 18
torch._dynamo.config.recompile_limit = 4096  # was 8: "hit config.recompile_limit" after a few hundred updates


def actor(policy, n_envs, horizon, device, out):
    """Synthetic vectorised env: observations are random, the reward prefers actions aligned with a fixed map."""
    g = torch.Generator(device=device).manual_seed(1)
    w_reward = torch.randn(OBS, ACTIONS, generator=g, device=device)
    while True:
        obs_buf, act_buf, logp_buf, rew_buf, val_buf = [], [], [], [], []
        with torch.no_grad():
            for _ in range(horizon):
                obs = torch.randn(n_envs, OBS, generator=g, device=device)
                logits, value = policy(obs)
                logp_all = torch.log_softmax(logits, -1)
                gumbel = -torch.log(-torch.log(torch.rand(logits.shape, generator=g, device=device)))
                act = (logp_all + gumbel).argmax(-1)  # a categorical sample, without leaving the device
                obs_buf.append(obs), act_buf.append(act), val_buf.append(value)
                logp_buf.append(logp_all.gather(1, act[:, None]).squeeze(1))
                rew_buf.append((obs @ w_reward).gather(1, act[:, None]).squeeze(1) * 0.1)
        out.put(tuple(torch.stack(b) for b in (obs_buf, act_buf, logp_buf, rew_buf, val_buf)))


def gae(rew, val, last_val, gamma=0.99, lam=0.95):
    adv = torch.zeros_like(rew)
    running = torch.zeros_like(last_val)
    for t in reversed(range(rew.shape[0])):
        nxt = last_val if t == rew.shape[0] - 1 else val[t + 1]
        delta = rew[t] + gamma * nxt - val[t]
        running = delta + gamma * lam * running
        adv[t] = running
    return adv, adv + val


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--step-buffer", action="store_true")
    ap.add_argument("--backend", default="inductor")
    args = ap.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    n_envs, horizon, minibatch, hidden = (256, 64, 4096, 512) if gpu else (16, 16, 64, 64)
    torch.manual_seed(0)
    policy = ActorCritic(OBS, ACTIONS, hidden=hidden, step_as_buffer=args.step_buffer).to(device)
    compiled = torch.compile(policy, backend=args.backend, dynamic=False)
    opt = torch.optim.Adam(policy.parameters(), lr=3e-4, eps=1e-5)
    rollouts = queue.Queue(maxsize=2)
    threading.Thread(target=actor, args=(policy, n_envs, horizon, device, rollouts), name="actor",
                     daemon=True).start()
    print(f"ppo: {n_envs} envs x {horizon} steps, minibatch {minibatch}, anneal_step "
          f"{'buffer' if args.step_buffer else 'int attribute'}", flush=True)

    update, t0 = 0, time.time()
    while True:
        obs, act, old_logp, rew, val = rollouts.get()
        policy.set_progress(update)
        with torch.no_grad():
            _, last_val = compiled(obs[-1])  # bootstrap value (n_envs rows)
        adv, ret = gae(rew, val, last_val)
        obs, act, old_logp = obs.flatten(0, 1), act.flatten(), old_logp.flatten()
        adv, ret = adv.flatten(), ret.flatten()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        perm = torch.randperm(obs.shape[0], device=device)
        for k in range(0, obs.shape[0], minibatch):
            idx = perm[k:k + minibatch]
            logits, value = compiled(obs[idx])
            logp = torch.log_softmax(logits, -1).gather(1, act[idx][:, None]).squeeze(1)
            ratio = (logp - old_logp[idx]).exp()
            pg = -torch.min(ratio * adv[idx], ratio.clamp(0.8, 1.2) * adv[idx]).mean()
            loss = pg + 0.5 * F.mse_loss(value, ret[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            opt.step()
        update += 1
        if update % 5 == 0 or update <= 3:
            print(f"update {update} loss {loss.item():.4f} return {rew.sum(0).mean().item():.3f} "
                  f"temp {float(policy.temperature()):.3f} {update / (time.time() - t0):.2f} updates/s", flush=True)


if __name__ == "__main__":
    main()
