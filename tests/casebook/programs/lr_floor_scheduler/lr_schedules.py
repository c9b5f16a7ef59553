"""Learning-rate schedules (linear warm-up + polynomial decay), as in BERT-style pretraining code."""
from torch.optim.lr_scheduler import LambdaLR


def warmup_poly_decay(optimizer, warmup_steps, total_steps, power=1.0, end_factor=0.0):
    def factor(step):
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return end_factor + (1.0 - end_factor) * (1.0 - progress) ** power

    return LambdaLR(optimizer, factor)
