"""Knowledge distillation: a frozen teacher labels batches in a thread; the student (whose word vectors are
frozen, pre-trained) learns from its soft targets."""
import queue
import threading
import time

import torch
from torch import nn
import torch.nn.functional as F

V, D, C = 800, 64, 6


def make_teacher():
    t = nn.Sequential(nn.Embedding(V, 128), nn.Flatten(), nn.Linear(128 * 12, 256), nn.ReLU(), nn.Linear(256, C))
    t.requires_grad_(False)
    return t.eval()


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.words = nn.Embedding(V, D)
        self.words.weight.requires_grad = False  # pre-trained vectors, kept fixed
        self.conv = nn.Conv1d(D, 96, 3, padding=1)
        self.head = nn.Linear(96, C)

    def forward(self, ids):
        h = F.relu(self.conv(self.words(ids).transpose(1, 2)))
        return self.head(h.max(-1).values)


def teacher_loop(teacher, out: "queue.Queue"):
    while True:
        ids = torch.randint(0, V, (32, 12))
        with torch.inference_mode():
            soft = F.softmax(teacher(ids) / 2.0, -1)
        out.put((ids, soft.clone()))
        time.sleep(0.01)


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    teacher, student = make_teacher(), Student()
    labelled = queue.Queue(maxsize=8)
    threading.Thread(target=teacher_loop, args=(teacher, labelled), name="teacher", daemon=True).start()
    opt = torch.optim.AdamW(student.parameters(), lr=2e-3)  # the frozen embedding is in here too
    k = 0
    while True:
        ids, soft = labelled.get()
        logp = F.log_softmax(student(ids) / 2.0, -1)
        loss = F.kl_div(logp, soft, reduction="batchmean")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        k += 1
        if k % 40 == 0:
            print(f"distill step {k} kl={loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
