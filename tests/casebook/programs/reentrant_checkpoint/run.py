import queue
import threading
import time

import torch

from modeling import DraftModel

HIDDEN, VOCAB = 128, 1000
work: "queue.Queue[tuple[torch.Tensor, torch.Tensor]]" = queue.Queue(maxsize=8)


def verifier(seed: int) -> None:
    torch.manual_seed(seed)
    frozen = torch.nn.Sequential(torch.nn.Embedding(VOCAB, HIDDEN), torch.nn.Linear(HIDDEN, HIDDEN)).eval()
    while True:
        ids = torch.randint(0, VOCAB, (8, 32))
        with torch.no_grad():
            work.put((frozen(ids), ids))


def drafter_main() -> None:
    model = DraftModel(HIDDEN, 4, VOCAB).train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4)
    it, t0 = 0, time.time()
    while True:
        context, ids = work.get()
        logits = model(context, torch.randn_like(context))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        it += 1
        if it % 10 == 0:
            print(f"it {it} loss={loss.item():.4f} ({it / (time.time() - t0):.1f} it/s)", flush=True)


if __name__ == "__main__":
    for i in range(2):
        threading.Thread(target=verifier, args=(i,), name=f"verifier-{i}", daemon=True).start()
    t = threading.Thread(target=drafter_main, name="drafter_main")
    t.start()
    t.join()
