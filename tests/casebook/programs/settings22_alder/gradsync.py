"""Gradient averaging across the data-parallel ranks.

The gradients are packed into flat buckets of at most `bucket_kb` KiB and each bucket is
all-reduced with the default process group (gloo), then unpacked and divided by the world
size; the per-step metrics (loss, correct, count) go through one more all-reduce.
"""
import torch
import torch.distributed as dist


class GradientAverager:
    def __init__(self, params, bucket_kb):
        self.params = [p for p in params if p.requires_grad]
        self.buckets, cur, size = [], [], 0
        limit = bucket_kb * 1024
        for p in self.params:
            nbytes = p.numel() * p.element_size()
            if cur and size + nbytes > limit:
                self.buckets.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += nbytes
        if cur:
            self.buckets.append(cur)
        self.world = dist.get_world_size()

    def sync(self):
        for bucket in self.buckets:
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            dist.all_reduce(flat)
            flat /= self.world
            off = 0
            for p in bucket:
                n = p.numel()
                p.grad.copy_(flat[off:off + n].view_as(p.grad))
                off += n


def reduce_metrics(loss, correct, count):
    t = torch.tensor([float(loss) * count, float(correct), float(count)], dtype=torch.float64)
    dist.all_reduce(t)
    return t[0].item() / t[2].item(), t[1].item() / t[2].item()
