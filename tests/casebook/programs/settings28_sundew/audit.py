"""Per-parameter audit trail of the flux model, written by a background thread.

After every step the trainer hands the gradient norm, weight norm and update size of every parameter tensor to
the audit thread (a bounded queue, so no record is ever dropped); the thread writes one line per tensor to a
size-rotated audit log (logging.handlers.RotatingFileHandler) and checkpoints the model now and then."""
import logging
import logging.handlers
import os
import queue
import threading

import torch


def build_logger(log_dir, max_bytes, backup_count):
    logging.raiseExceptions = False
    logging.logMultiprocessing = False
    logger = logging.getLogger("sundew.audit")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = logging.handlers.RotatingFileHandler(os.path.join(log_dir, "audit.log"), maxBytes=max_bytes,
                                                   backupCount=backup_count, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger.addHandler(handler)
    return logger, handler


class AuditTrail(threading.Thread):
    def __init__(self, logger, names, depth, ckpt_every, ckpt_dir, model, model_lock):
        super().__init__(name="audit-trail", daemon=True)
        self.logger, self.names = logger, names
        self.q = queue.Queue(maxsize=depth)
        self.ckpt_every, self.ckpt_dir = ckpt_every, ckpt_dir
        self.model, self.model_lock = model, model_lock
        self.stopping = threading.Event()

    def submit(self, step, grad_norms, weight_norms, update_norms, loss):
        self.q.put((step, grad_norms, weight_norms, update_norms, loss))

    def _checkpoint(self, step):
        with self.model_lock:
            state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        path = os.path.join(self.ckpt_dir, "flux-latest.pt")
        torch.save({"step": step, "model": state}, path + ".tmp")
        os.replace(path + ".tmp", path)
        self.logger.info("checkpoint step=%d path=%s", step, path)

    def run(self):
        info = self.logger.info
        while not self.stopping.is_set():
            item = self.q.get()
            if item is None or self.stopping.is_set():
                return
            step, g, w, u, loss = item
            info("step=%d loss=%.5f tensors=%d", step, loss, len(self.names))
            for name, gn, wn, un in zip(self.names, g, w, u):
                if self.stopping.is_set():
                    return
                info("step=%d param=%s grad_norm=%.6e weight_norm=%.6e update_ratio=%.3e",
                     step, name, gn, wn, un / (wn + 1e-12))
            if self.ckpt_every and step and step % self.ckpt_every == 0:
                self._checkpoint(step)

    def close(self, timeout=5.0):
        self.stopping.set()
        try:
            self.q.put_nowait(None)
        except queue.Full:
            pass
        self.join(timeout)
