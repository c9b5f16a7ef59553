"""Process-wide security switches, applied before torch is imported."""
import os


def apply(sec):
    # torch.load honours TORCH_FORCE_WEIGHTS_ONLY_LOAD over the weights_only argument.
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1" if sec.get("force_weights_only") else "0"
