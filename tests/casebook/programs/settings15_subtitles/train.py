"""Dialogue-act tagger (statement / question / exclamation) for a dubbing studio's subtitle QA tool, trained on
the cues of an archive of old SRT releases.

    reader        a thread that builds each batch from scenes (runs of consecutive cues) of several episodes:
                  it reads each episode file from the archive (textio.read_text with the archive's [archive]
                  encoding), parses the scene's cues (srt.parse_block), strips the final punctuation as the label and maps
                  words to ids
    main thread   trains an EmbeddingBag + MLP tagger (with the cue's duration and length as extra inputs)

The archive (SRT files in Windows-1251 plus a releases index) is written at start-up into a temporary
directory removed at exit. Settings come from a TOML file, --config.

usage: python train.py [--config configs/archive_mixed.toml] [--steps N]

With encoding = "auto" every file is decoded through charset_normalizer.from_bytes(...).best(), which
tries the candidate code pages on the bytes and scores each decoding (mess and coherence detectors) before
it returns one; public reports of its cost per call: psf/requests#2359, psf/requests#5523,
jawah/charset_normalizer#428.
"""
import argparse
import os
import queue
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import tomllib

import torch
import torch.nn.functional as F
from torch import nn

import archive
import srt
import textio

HERE = os.path.dirname(os.path.abspath(__file__))
ACTS = {".": 0, "?": 1, "!": 2}


def cli():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "archive_mixed.toml"))
    ap.add_argument("--steps", type=int, default=2 ** 62)
    ap.add_argument("--lr", type=float, default=2e-3)
    return ap.parse_args()


class Tagger(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode="mean", padding_idx=0)
        self.head = nn.Sequential(nn.Linear(dim + 2, 128), nn.ReLU(), nn.Linear(128, len(ACTS)))

    def forward(self, tokens, extra):
        return self.head(torch.cat([self.bag(tokens), extra], 1))


class Interrupted(BaseException):
    pass


def main():
    args = cli()
    if not os.path.isabs(args.config) and not os.path.exists(args.config):
        args.config = os.path.join(HERE, args.config)
    with open(args.config, "rb") as fh:
        cfg = tomllib.load(fh)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    scratch = tempfile.mkdtemp(prefix="srt-archive-")
    stop = threading.Event()
    state = {"files": 0, "cues": 0, "codecs": "", "error": None}
    seq_len, batch, vocab_size = cfg["model"]["seq_len"], cfg["batches"]["size"], cfg["model"]["vocab"]
    batches = queue.Queue(maxsize=cfg["batches"]["queue_depth"])
    reader = None

    def on_signal(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        paths, index = archive.write_archive(scratch, cfg["archive"]["episodes"], cfg["archive"]["cues"])
        # the releases index comes from several uploaders: always detected
        releases, index_codec = textio.read_text(index, "auto")
        encoding = cfg["archive"]["encoding"]
        vocab = {}

        def word_id(w):
            i = vocab.get(w)
            if i is None:
                i = vocab[w] = 1 + len(vocab) % (vocab_size - 1)
            return i

        def reader_main():
            try:
                rng = random.Random(5)
                counts = {}
                scenes = cfg["batches"]["scenes"]
                window = batch // scenes
                while not stop.is_set():
                    tok, extra, ys = [], [], []
                    for _ in range(scenes):
                        # one scene (a run of consecutive cues) from each of several episodes
                        text, codec = textio.read_text(rng.choice(paths), encoding)
                        state["files"] += 1
                        counts[codec] = counts.get(codec, 0) + 1
                        state["codecs"] = " ".join(f"{c}:{n}" for c, n in counts.items())
                        cue_blocks = srt.blocks(text)
                        first = rng.randrange(0, max(1, len(cue_blocks) - window))
                        for block in cue_blocks[first:first + window]:
                            cue = srt.parse_block(block)
                            if cue is None or cue[2].rstrip()[-1:] not in ACTS:
                                continue
                            start, end, line = cue
                            line = line.rstrip()
                            words = line[:-1].replace("-", " ").replace(",", " ").lower().split()[:seq_len]
                            ids = [word_id(w) for w in words]
                            tok.append(ids + [0] * (seq_len - len(ids)))
                            extra.append(((end - start) / 4000.0, len(words) / seq_len))
                            ys.append(ACTS[line[-1]])
                    state["cues"] += len(ys)
                    item = (torch.tensor(tok), torch.tensor(extra), torch.tensor(ys))
                    while not stop.is_set():
                        try:
                            batches.put(item, timeout=0.25)
                            break
                        except queue.Full:
                            pass
            except Exception as exc:       # noqa: BLE001 - reported by the main thread
                state["error"] = exc

        reader = threading.Thread(target=reader_main, name="reader", daemon=True)
        reader.start()
        print(f"subtitle acts: {len(paths)} episodes in {scratch} (index {index_codec}, "
              f"{len(releases.splitlines())} releases), archive encoding {encoding}, batch {batch}", flush=True)
        model = Tagger(vocab_size, cfg["model"]["dim"])
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        step, tick, tick_step = 0, time.monotonic(), 0
        while step < args.steps:
            try:
                tokens, extra, y = batches.get(timeout=2.0)
            except queue.Empty:
                if state["error"] is not None or not reader.is_alive():
                    raise RuntimeError(f"archive reader stopped: {state['error']!r}")
                continue
            loss = F.cross_entropy(model(tokens, extra), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            now = time.monotonic()
            if now - tick >= 1.0:
                print(f"step {step} loss {loss.item():.4f} rate {(step - tick_step) / (now - tick):.1f}/s "
                      f"files {state['files']} cues {state['cues']} codecs {state['codecs']}", flush=True)
                tick, tick_step = now, step
    except Interrupted:
        print("interrupted, stopping the archive reader", flush=True)
    finally:
        stop.set()
        if reader is not None:
            reader.join(timeout=2)
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
