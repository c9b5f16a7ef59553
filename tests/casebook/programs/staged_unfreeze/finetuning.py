"""A BackboneFinetuning-style callback: the backbone stays frozen (and its BatchNorm in eval mode) for the first
``unfreeze_at_step`` steps while only the head trains; then it is unfrozen and handed to the optimizer as a new
param group with a smaller learning rate (as Lightning's BackboneFinetuning does, see luxonis/luxonis-train#234
and pytorch/pytorch#2374, which added ``Optimizer.add_param_group`` for exactly this)."""
import torch.nn as nn


def freeze(module: nn.Module) -> None:
    module.requires_grad_(False)
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eval()


def make_trainable(module: nn.Module) -> None:
    module.requires_grad_(True)
    module.train()


class BackboneFinetuning:
    def __init__(self, unfreeze_at_step: int = 100, backbone_lr_ratio: float = 0.1) -> None:
        self.unfreeze_at_step = unfreeze_at_step
        self.backbone_lr_ratio = backbone_lr_ratio
        self.unfrozen = False

    def on_fit_start(self, model) -> None:
        freeze(model.backbone)

    def on_train_batch_start(self, model, optimizer, step: int) -> None:
        if self.unfrozen or step < self.unfreeze_at_step:
            # frozen BN layers must stay in eval mode even though model.train() is called every epoch
            if not self.unfrozen:
                freeze(model.backbone)
            return
        make_trainable(model.backbone)
        head_lr = optimizer.param_groups[0]["lr"]
        optimizer.add_param_group({"params": list(model.backbone.parameters()),
                                   "lr": head_lr * self.backbone_lr_ratio, "name": "backbone"})
        self.unfrozen = True
        print(f"[finetune] step {step}: backbone unfrozen, param group added with lr={head_lr * self.backbone_lr_ratio:g}",
              flush=True)
