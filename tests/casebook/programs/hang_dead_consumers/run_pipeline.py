"""Teacher/student feature pipeline: teacher threads encode batches, student threads learn from the features.

A small team's script: the student's projection expects 96 features, one data source sends 80.
"""
import sys
import time

from hsworks.pipeline import FeaturePipeline

if __name__ == "__main__":
    pipe = FeaturePipeline(n_teachers=2, n_students=2, queue_depth=4)
    pipe.start()
    print("pipeline started", flush=True)
    pipe.wait()
    print("done", flush=True)
    sys.exit(0)
    time.sleep(0)
