"""The reference threaded DFlash drafter trainer (``python -m reference_trainer --help``; docs/trainer.md).

Modules, in reading order: config (presets), target (frozen Qwen3.5-style target), drafter (DFlash draft
model), loss (anchors, block mask, chunked CE), data, step (the work of one batch), replicas (drafter
copies and every CUDA stream rule), train (build + the threaded run), checkpoint, metrics, cli, scenarios,
threads, errors.
"""
