#!/usr/bin/env python3
# Snapshot-ensemble distillation students: several small students distil one frozen teacher, each on its own
# thread. Each student thread pins torch to one intra-op thread so the students share the cores instead of
# fighting over them (the teacher's forward is cheap and runs inside each student).
import logging
import threading
import time

import torch
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")
LOG = logging.getLogger("snapens")

N_STUDENTS = 4
THREADS_PER_STUDENT = 1  # students x threads <= cores

torch.set_num_interop_threads(1)  # no inter-op parallelism: the students are the parallelism


class Teacher(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(96, 160), torch.nn.Tanh(), torch.nn.Linear(160, 32))

    @torch.no_grad()
    def soft_targets(self, x, temperature=2.0):
        return F.softmax(self.body(x) / temperature, dim=-1)


class StudentThread(threading.Thread):
    def __init__(self, rank, teacher, counter):
        super().__init__(name=f"student-{rank}", daemon=True)
        self.rank, self.teacher, self.counter = rank, teacher, counter
        self.net = torch.nn.Sequential(torch.nn.Linear(96, 192), torch.nn.ReLU(), torch.nn.Linear(192, 32))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=3e-4)

    def run(self):
        torch.set_num_threads(THREADS_PER_STUDENT)
        g = torch.Generator().manual_seed(self.rank)
        while True:
            x = torch.randn(48, 96, generator=g)
            target = self.teacher.soft_targets(x)
            loss = F.kl_div(F.log_softmax(self.net(x), dim=-1), target, reduction="batchmean")
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.counter[self.rank] += x.shape[0]


def main():
    teacher = Teacher().eval()
    counter = [0] * N_STUDENTS
    for rank in range(N_STUDENTS):
        StudentThread(rank, teacher, counter).start()
    while sum(counter) < 48 * 20 * N_STUDENTS:  # every student past its first steps
        time.sleep(0.2)
    epoch, before, t0 = 0, sum(counter), time.time()
    while True:
        time.sleep(2.0)
        epoch += 1
        total, now = sum(counter), time.time()
        LOG.info("epoch %d distilled %.0f samples/s", epoch, (total - before) / (now - t0))
        before, t0 = total, now


if __name__ == "__main__":
    main()
