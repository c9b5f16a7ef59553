"""jobkit: the small pieces our training jobs share (a metrics registry, a background checkpointer)."""
