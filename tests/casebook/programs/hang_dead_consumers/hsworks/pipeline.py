import itertools
import queue
import threading

import torch

from hsworks.nets import Student, Teacher

SOURCES = [96, 96, 96, 80]  # feature widths per data source: the last one is wrong


class FeaturePipeline:
    def __init__(self, n_teachers: int, n_students: int, queue_depth: int) -> None:
        self.feature_queue: queue.Queue[torch.Tensor] = queue.Queue(maxsize=queue_depth)
        self.teachers = [Teacher() for _ in range(n_teachers)]
        self.students = [Student() for _ in range(n_students)]
        self.workers: list[threading.Thread] = []
        self.counter = itertools.count()

    def start(self) -> None:
        for i, teacher in enumerate(self.teachers):
            t = threading.Thread(target=self.teach, args=(teacher,), name=f"teacher-{i}", daemon=True)
            self.workers.append(t)
        for i, student in enumerate(self.students):
            t = threading.Thread(target=self.learn, args=(student,), name=f"student-{i}", daemon=True)
            self.workers.append(t)
        for t in self.workers:
            t.start()

    def teach(self, teacher: Teacher) -> None:
        while True:
            n = next(self.counter)
            width = SOURCES[n % len(SOURCES)] if n > 12 else 96
            x = torch.randn(64, 96)
            feats = teacher.features(x)[:, :width]
            self.feature_queue.put(feats)

    def learn(self, student: Student) -> None:
        opt = torch.optim.SGD(student.parameters(), lr=1e-3)
        step = 0
        while True:
            feats = self.feature_queue.get()
            loss = (student(feats) - feats).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            step += 1
            if step % 5 == 0:
                print(f"{threading.current_thread().name} step {step} loss {loss.item():.4f}", flush=True)

    def wait(self) -> None:
        for t in self.workers:
            t.join()
