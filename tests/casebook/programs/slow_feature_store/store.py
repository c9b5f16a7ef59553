"""A stand-in for a remote feature store: a separate process that serves fixed-size uint8 feature records over
TCP, at the rate its (shared, throttled) link allows."""
import socket
import time

ROWS, COLS = 32, 512
RECORD_BYTES = ROWS * COLS  # one uint8 feature per byte
LINK_DELAY_S = 0.25  # per record: the link, not the trainer, sets the pace


def serve(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    record = bytes(range(256)) * (RECORD_BYTES // 256)
    while True:
        time.sleep(LINK_DELAY_S)
        conn.sendall(record)
