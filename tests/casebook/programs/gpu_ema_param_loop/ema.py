# Exponential moving average of model weights, kept for evaluation.
#
# ModelEmaLoop is the classic implementation (one update per state_dict entry, out of place, as the first timm
# ModelEma did); ModelEmaForeach does the same update with one fused multi-tensor lerp over all float entries.
import copy

import torch


class ModelEmaLoop:
    def __init__(self, model, decay=0.9998):
        self.module = copy.deepcopy(model).eval()
        self.decay = decay
        for p in self.module.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        d = self.decay
        for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
            if ema_v.dtype.is_floating_point:
                ema_v.copy_(ema_v * d + (1.0 - d) * model_v)
            else:
                ema_v.copy_(model_v)


class ModelEmaForeach(ModelEmaLoop):
    def __init__(self, model, decay=0.9998):
        super().__init__(model, decay)
        self._pairs = None

    def _bind(self, model):
        ema_sd, model_sd = self.module.state_dict(), model.state_dict()
        floats = [k for k, v in ema_sd.items() if v.dtype.is_floating_point]
        self._pairs = ([ema_sd[k] for k in floats], [model_sd[k] for k in floats],
                       [(ema_sd[k], model_sd[k]) for k in ema_sd if k not in floats])

    @torch.no_grad()
    def update(self, model):
        if self._pairs is None:
            self._bind(model)
        ema_f, model_f, other = self._pairs
        torch._foreach_lerp_(ema_f, model_f, 1.0 - self.decay)
        for e, m in other:
            e.copy_(m)
