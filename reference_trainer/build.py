"""Step 1 of the trainer: ``build(config) -> Built``, everything that lives as long as the models.

The frozen target (one per distinct target device), the drafter replicas (one per drafter thread, identical
at init), the data, the kernel report, the scenario's frozen settings, and where the run starts (a
checkpoint's step, or 0). Nothing here starts a thread or touches the probe board; ``train.Run`` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from reference_trainer import checkpoint, replicas, scenarios, step
from reference_trainer.config import TrainConfig
from reference_trainer.data import JsonlDataset, SyntheticStream, make_source
from reference_trainer.drafter import CheckpointMode, DFlashDraftModel
from reference_trainer.errors import UserError
from reference_trainer.replicas import Replica
from reference_trainer.target import (
    FrozenTarget,
    KernelReport,
    force_gdn_torch_fallback,
    gdn_kernel_report,
    install_short_conv,
    load_target,
)


@dataclass(frozen=True)
class Built:
    config: TrainConfig
    targets: Mapping[str, FrozenTarget]  # one per distinct target device
    replicas: tuple[Replica, ...]
    data: SyntheticStream | JsonlDataset
    kernels: KernelReport
    attention: str  # flex | flex-eager | sdpa
    scenario: scenarios.Scenario
    resume: checkpoint.Resume  # step 0 unless --resume


def build(config: TrainConfig, targets: Mapping[str, FrozenTarget] | None = None) -> Built:
    """Everything a run needs. ``targets`` reuses frozen targets already built for the same target shapes
    (a benchmark comparing drafter settings; the short conv is re-bound from ``config``)."""
    torch.manual_seed(config.seed)
    scenario = scenarios.resolve(config.scenario)
    data = make_source(config.data)
    if targets is None:
        targets = _load_targets(config, scenario)
        short_conv = next(iter(targets.values())).kernels.short_conv
    else:
        targets = {name: targets[name] for name in dict.fromkeys(config.target_devices)}
        short_conv = install_short_conv(config.target.short_conv, torch.device(config.target_devices[0]))
    first_target = next(iter(targets.values()))
    _check_target_shapes(config, first_target)
    # Read again after the slow-fallback scenario may have rebound the GDN op.
    kernels = dataclasses.replace(gdn_kernel_report(first_target.model, first_target.device), short_conv=short_conv)
    if scenario.force_gdn_fallback and not kernels.fast and first_target.device.type == "cuda":
        kernels = dataclasses.replace(kernels, reason=f"forced by --scenario {config.scenario}")
    torch.manual_seed(config.seed + 1)
    template = drafter_template(config, scenario.keyword_checkpoint_calls)
    made = tuple(replicas.make_replica(rank, torch.device(name), template, config, scenario, targets)
                 for rank, name in enumerate(config.drafter_devices))
    if config.compile_layers:
        _compile_now(made, config, scenario, data, targets)
    path = checkpoint.resume_path(config)
    resume = checkpoint.load_into(path, config, made) if path else checkpoint.Resume()
    return Built(config=config, targets=targets, replicas=made, data=data, kernels=kernels,
                 attention=replicas.attention_for(made[-1].device, config, scenario), scenario=scenario,
                 resume=resume)


def drafter_template(config: TrainConfig, keyword_calls: bool) -> DFlashDraftModel:
    """The drafter every replica starts as (initialised from the current torch seed)."""
    template = DFlashDraftModel(config.drafter)
    template.checkpoint_mode = CheckpointMode(enabled=config.checkpoint_layers,
                                              use_reentrant=config.objective.use_reentrant,
                                              keyword_calls=keyword_calls)
    return template


def _compile_now(made: tuple[Replica, ...], config: TrainConfig, scenario: scenarios.Scenario,
                 data: SyntheticStream | JsonlDataset, targets: dict[str, FrozenTarget]) -> None:
    """Compile the draft layers here, on the main thread, before any worker thread exists (torch.compile is
    not thread-safe in torch <= 2.11): one forward + backward per replica on a real batch's shapes (zero
    hidden states), gradients dropped. Later calls from the drafter threads only check guards."""
    batch = data.batch(0)
    width = len(config.drafter.target_layer_ids) * config.drafter.hidden_size
    for replica in made:
        target = targets.get(str(replica.device), next(iter(targets.values())))
        hidden = torch.zeros(*batch.input_ids.shape, width, dtype=target.dtype, device=replica.device)
        with replicas.use_stream(replica.device, replica.stream):
            step.drafter_forward_backward(replica, hidden, batch, config, scenario)
            replica.optimizer.zero_grad(set_to_none=True)
            if replica.device.type == "cuda":
                torch.cuda.current_stream(replica.device).synchronize()  # SYNC: once, at start-up


def _load_targets(config: TrainConfig, scenario: scenarios.Scenario) -> dict[str, FrozenTarget]:
    targets: dict[str, FrozenTarget] = {}
    for device_name in dict.fromkeys(config.target_devices):
        device = torch.device(device_name)
        torch.manual_seed(config.seed)  # same seed per device: every target copy has the same random weights
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        targets[device_name] = load_target(config.target, config.drafter.target_layer_ids, device, dtype)
        if scenario.force_gdn_fallback:
            force_gdn_torch_fallback(targets[device_name].model)
    return targets


def _check_target_shapes(config: TrainConfig, target: FrozenTarget) -> None:
    """A --target-path checkpoint must have the shapes the preset's drafter was sized for."""
    hf, drafter = target.model.config, config.drafter
    if (hf.hidden_size, hf.vocab_size) != (drafter.hidden_size, drafter.vocab_size):
        raise UserError(f"--target-path: hidden {hf.hidden_size} / vocab {hf.vocab_size} do not match preset "
                        f"{config.preset!r} (hidden {drafter.hidden_size} / vocab {drafter.vocab_size}); "
                        "pick the preset of that model size")
