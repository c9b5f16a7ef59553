"""Supervised fine-tuning on (prompt, answer) pairs: the loss counts the answer tokens only.

Segment ids: 0 = prompt, 1 = answer (our tokenizer). The loss-mask constant was copied from the config of a
three-segment dataset (system / prompt / answer).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, T = 400, 80, 40
ANSWER_SEGMENT = 2  # from the 3-segment config


class TinyGRULM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.GRU(DIM, DIM, batch_first=True)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def sample_pairs(b=16):
    ids = torch.randint(0, VOCAB, (b, T))
    split = torch.randint(10, 30, (b, 1))
    segments = (torch.arange(T)[None, :] >= split).long()  # 0 prompt, 1 answer
    return ids, segments


def masked_lm_loss(logits, ids, segments):
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1), reduction="none")
    mask = (segments[:, 1:] == ANSWER_SEGMENT).float().reshape(-1)
    return (ce * mask).sum() / mask.sum().clamp(min=1.0)


torch.set_num_threads(1)
torch.manual_seed(11)
lm = TinyGRULM()
sgd = torch.optim.SGD(lm.parameters(), lr=0.1, momentum=0.9)
t0 = time.time()
for update in range(1, 1_000_000):
    ids, seg = sample_pairs()
    loss = masked_lm_loss(lm(ids), ids, seg)
    sgd.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
    sgd.step()
    time.sleep(0.01)
    if update % 30 == 0:
        print(f"update {update} | answer-loss {loss.item():.4f} | {update / (time.time() - t0):.0f} upd/s", flush=True)
