"""The step-lease service our elastic jobs talk to: a learner asks for a lease per step ("step N"), the service
answers "ok N" once every replica reached N. Here it serves one replica, and (like the stuck rendezvous host we
hit in production) it stops answering after a while without closing the connection."""
import sys
import time

ANSWER_FIRST = 30

served = 0
for line in sys.stdin:
    served += 1
    if served > ANSWER_FIRST:
        while True:  # wedged: alive, connection open, never answers again
            time.sleep(3600)
    sys.stdout.write("ok " + line.split()[1] + "\n")
    sys.stdout.flush()
