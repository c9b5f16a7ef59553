"""Training callbacks: progress printing and the first-epoch profiler."""
import time

from torch.profiler import ProfilerActivity, profile, schedule


class Progress:
    def __init__(self, every):
        self.every, self.t0 = every, time.time()

    def on_step_end(self, step, loss):
        if step % self.every == 0:
            now = time.time()
            print(f"it {step} loss {loss:.4f} | {self.every / (now - self.t0):.2f} it/s", flush=True)
            self.t0 = now


class EpochProfiler:
    """Profiles the first epoch with torch.profiler and prints the top operators when the epoch ends.

    ``window``: profile every step of epoch 0 ("epoch"), or a short scheduled window at the start ("steps:N").
    """

    def __init__(self, window="epoch"):
        self.window = window
        self.prof = None

    def on_train_start(self):
        if self.window == "epoch":
            self.prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True)
        else:
            active = int(self.window.split(":")[1])
            self.prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True,
                                schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
                                on_trace_ready=self._print_top)
        self.prof.start()

    def on_step_end(self, step):
        if self.window != "epoch":
            self.prof.step()

    def on_epoch_end(self, epoch):
        if epoch == 0 and self.prof is not None and self.window == "epoch":
            self.prof.stop()
            self._print_top(self.prof)

    @staticmethod
    def _print_top(prof):
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8), flush=True)
