import torch
import torch.nn as nn


class ActorCritic(nn.Module):
    """Shared torso, a policy head with an annealed softmax temperature (exploration), a value head.

    The temperature falls linearly with the number of learner updates (`anneal_step`), from 1.0 to 0.3.
    """

    def __init__(self, obs_dim, n_actions, hidden=512, anneal_updates=20_000, step_as_buffer=False):
        super().__init__()
        self.torso = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh())
        self.pi = nn.Linear(hidden, n_actions)
        self.v = nn.Linear(hidden, 1)
        self.anneal_updates = anneal_updates
        if step_as_buffer:
            self.register_buffer("anneal_step", torch.zeros((), dtype=torch.float32))
        else:
            self.anneal_step = 0

    def set_progress(self, update):
        if isinstance(self.anneal_step, torch.Tensor):
            self.anneal_step.fill_(update)
        else:
            self.anneal_step = update

    def temperature(self):
        if isinstance(self.anneal_step, torch.Tensor):
            return torch.clamp(1.0 - self.anneal_step / self.anneal_updates, min=0.3)
        return max(0.3, 1.0 - self.anneal_step / self.anneal_updates)

    def forward(self, obs):
        h = self.torso(obs)
        return self.pi(h) / self.temperature(), self.v(h).squeeze(-1)
