"""Run-wide settings for the scoring model (one place, imported first)."""
import torch

DEFAULTS = {
    "seed": 7,
    "batch": 128,
    "lr": 3e-4,
    "log_detail": "full",     # full | summary : how tensors render in the run journal
}


def apply(cfg):
    torch.manual_seed(cfg["seed"])
    if cfg["log_detail"] == "full":
        # reviewers asked for complete rows in the journal, no "..." elision
        torch.set_printoptions(profile="full", precision=4, sci_mode=False)
    else:
        torch.set_printoptions(profile="default", precision=4, sci_mode=False)
