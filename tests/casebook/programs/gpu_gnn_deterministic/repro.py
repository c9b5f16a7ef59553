"""Reproducibility switches, shared by every experiment in this repo."""
import os
import random

import torch


def seed_everything(seed: int, deterministic: bool = True) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    # cuBLAS needs a fixed workspace to be reproducible; harmless otherwise (must be set before the first matmul)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    if deterministic:
        # bit-exact reruns: every op with a deterministic implementation uses it (and the rest raise)
        torch.use_deterministic_algorithms(True)
