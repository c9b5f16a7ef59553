# memwatch -- find where host memory goes.
#
# Added while chasing the RSS creep of March (it was the answer cache, since fixed). `install()` starts
# tracemalloc with deep tracebacks so a snapshot can say which line allocates; `report()` prints the top sites.
# mode "always": trace for the whole run and report every `every_s`; "startup": trace the start-up only.
import threading
import time
import tracemalloc

DEPTH = 25  # frames kept per allocation: the culprit was deep inside the tokenizer


def install(mode="always", every_s=300.0):
    if mode == "off":
        return
    tracemalloc.start(DEPTH)
    if mode == "always":
        threading.Thread(target=_periodic, args=(every_s,), name="memwatch", daemon=True).start()


def report(top=5, stop=False):
    snap = tracemalloc.take_snapshot()
    for stat in snap.statistics("lineno")[:top]:
        print(f"[memwatch] {stat}", flush=True)
    if stop:
        tracemalloc.stop()


def _periodic(every_s):
    while True:
        time.sleep(every_s)
        report()
