"""Makes tests/ importable from every test directory (``from workload import pipeline_child``)."""
