"""imgpipe: ingest -> featurize -> fit, three stages joined by bounded queues."""
