"""Process-wide network defaults for the training job.

Every socket the job opens (the telemetry feed, the metrics push, the
checkpoint uploader) inherits the default timeout set here.  'guarded' gives
them all a 30 s timeout so a stalled peer raises instead of hanging the run;
'blocking' keeps Python's default of fully blocking sockets.
"""
import socket

DEFAULT_TIMEOUTS = {"guarded": 30.0, "blocking": None}


def apply(profile):
    timeout = DEFAULT_TIMEOUTS[profile]
    socket.setdefaulttimeout(timeout)
    return timeout
