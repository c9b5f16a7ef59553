"""Wire format between the building-telemetry feed and its consumers: length-prefixed JSON documents.

    frame := b"%08x\n" % len(payload) + payload        (payload: one UTF-8 JSON snapshot)

The encoder's layout comes from BMS_WIRE_LAYOUT, read once when the feed starts:

    pretty    indent=2, keys sorted: what the facilities team's capture tool expects when it tees the feed into
              files they read by eye (and what they diff between firmware releases)
    compact   no indentation, (",", ":") separators, keys sorted
"""
import json
import os

LAYOUTS = {
    "pretty": {"indent": 2, "sort_keys": True, "ensure_ascii": False},
    "compact": {"indent": None, "separators": (",", ":"), "sort_keys": True, "ensure_ascii": False},
}
ENV_VAR = "BMS_WIRE_LAYOUT"
HEADER = 9


def encoder_from_env(environ=os.environ):
    layout = environ.get(ENV_VAR, "pretty")
    return json.JSONEncoder(**LAYOUTS[layout]), layout


def frame(encoder, doc):
    payload = encoder.encode(doc).encode("utf-8")
    return b"%08x\n" % len(payload) + payload


def read_frame(stream):
    head = _read_exact(stream, HEADER)
    if head is None:
        return None
    body = _read_exact(stream, int(head[:8], 16))
    if body is None:
        raise EOFError("feed closed mid-frame")
    return json.loads(body)


def _read_exact(stream, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = stream.readinto(view[got:])
        if not k:
            return None if got == 0 else buf[:got]
        got += k
    return buf
