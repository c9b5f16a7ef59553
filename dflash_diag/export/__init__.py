"""Exports to the tools users already have open: Chrome/Perfetto traces, speedscope profiles, Prometheus metrics.

Builders here are pure (an Observation and its analysis in, a JSON-ready dict or metric families out);
writing files (by the rules of :mod:`dflash_diag.snapshot.output`) and serving HTTP happen in ``dflash_diag.cli``.
docs/integrations.md describes each format and what it costs.
"""
