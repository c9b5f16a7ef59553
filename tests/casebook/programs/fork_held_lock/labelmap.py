"""The label vocabulary, shared by the dataset and the trainer. New labels arrive from the annotation service;
`refresh_async` pulls them in the background so that training does not wait for the service."""
import logging
import threading
import time

log = logging.getLogger("labelmap")

_lock = threading.Lock()
_labels = {f"class_{i}": i for i in range(20)}


def lookup(name):
    with _lock:
        return _labels.get(name, 0)


def _pull_from_annotation_service(in_flight):
    with _lock:  # the map must not change while readers use it
        in_flight.set()
        time.sleep(1.5)  # the annotation service is slow to answer
        for i in range(20, 24):
            _labels.setdefault(f"class_{i}", i)
    log.info("label map refreshed: %d labels", len(_labels))


def refresh_async():
    """Starts a refresh and returns once it is in flight."""
    in_flight = threading.Event()
    threading.Thread(target=_pull_from_annotation_service, args=(in_flight,), name="labelmap-refresh",
                     daemon=True).start()
    in_flight.wait()
