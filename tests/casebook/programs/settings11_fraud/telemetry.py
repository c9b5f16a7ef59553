"""Tracing for the feature pipeline (OpenTelemetry SDK), the same instrumentation the online scoring service uses.

Spans are exported synchronously, as JSON lines, to a file under the run's temporary directory (the log shipper
picks the file up; SimpleSpanProcessor so that nothing is lost if the job dies). The fraction of traces that are
recorded is chosen at start-up:

    --trace-sample 1.0     every trace recorded (what the on-call runbook sets when debugging feature skew)
    --trace-sample 0.001   one trace in a thousand recorded (what the scoring service runs with)
"""
import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

_PROVIDER = None


class JsonLinesExporter(SpanExporter):
    """Appends one JSON document per span; rotates the file at ROTATE_BYTES (the shipper tails both)."""

    ROTATE_BYTES = 64 << 20

    def __init__(self, path):
        self._path = path
        self._lock = threading.Lock()
        self._f = open(path, "a", encoding="utf-8")

    def export(self, spans):
        lines = [span.to_json(indent=None) + "\n" for span in spans]
        with self._lock:
            if self._f.closed:
                return SpanExportResult.FAILURE
            self._f.writelines(lines)
            if self._f.tell() > self.ROTATE_BYTES:
                self._f.close()
                os.replace(self._path, self._path + ".1")
                self._f = open(self._path, "a", encoding="utf-8")
        return SpanExportResult.SUCCESS

    def shutdown(self):
        with self._lock:
            self._f.close()

    def force_flush(self, timeout_millis=30000):
        with self._lock:
            if not self._f.closed:
                self._f.flush()
        return True


def setup(sample_ratio, outdir):
    global _PROVIDER
    provider = TracerProvider(
        sampler=ParentBased(TraceIdRatioBased(sample_ratio)),
        resource=Resource.create({"service.name": "fraud-features", "deployment.environment": "training"}))
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(os.path.join(outdir, "spans.jsonl"))))
    trace.set_tracer_provider(provider)
    _PROVIDER = provider
    return provider


def shutdown():
    if _PROVIDER is not None:
        _PROVIDER.shutdown()
