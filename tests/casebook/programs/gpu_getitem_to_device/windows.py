"""Sliding windows over multivariate sensor series, served as (history, future) pairs."""
import torch


class SensorWindows(torch.utils.data.Dataset):
    """All series live in one host tensor (series, time, channels); a sample is one window of one series.

    ``device``: where each sample is placed as it is read (so that batches "arrive on the GPU"); None leaves the
    samples on the host and the training loop moves whole batches.
    """

    def __init__(self, data, history, horizon, device=None):
        self.data, self.history, self.horizon, self.device = data, history, horizon, device
        self.per_series = data.shape[1] - history - horizon

    def __len__(self):
        return self.data.shape[0] * self.per_series

    def __getitem__(self, i):
        s, t = divmod(i, self.per_series)
        window = self.data[s, t:t + self.history + self.horizon]
        x, y = window[: self.history], window[self.history:, 0]
        if self.device is not None:
            x, y = x.to(self.device), y.to(self.device)
        return x, y
