"""Exports to the tools users already have open: Chrome/Perfetto traces, speedscope profiles, Prometheus metrics.

Builders here are pure (an Observation and its analysis in, a JSON-ready dict or metric families out);
writing files (by the rules of :mod:`dflash_diag.snapshot.output`) happens in ``dflash_diag.cli``; serving the
metrics page, bounded in renders, threads and rate, in :mod:`dflash_diag.export.serve`.
docs/integrations.md describes each format and what it costs.
"""
