"""Tokenizer factory for the review models.

The BPE vocabulary is learnt from the review corpus at start-up (byte-level, lower-cased) and saved as
tokenizer.json next to the run; the padding/truncation settings come from a JSON settings file, the same file
the serving side's exporter reads:

    {"truncation": {"max_length": N},
     "padding": {"strategy": "fixed" | "batch_longest", "length": N, "pad_to_multiple_of": M}}
"""
import json

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

SPECIALS = ["[PAD]", "[UNK]", "[CLS]"]


def learn_vocab(texts, path, vocab_size=3000):
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                                       show_progress=False))
    tok.save(path)


def load_settings(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def build_tokenizer(vocab_path, settings):
    tok = Tokenizer.from_file(vocab_path)
    pad_id = tok.token_to_id("[PAD]")
    trunc = settings.get("truncation")
    if trunc:
        tok.enable_truncation(max_length=trunc["max_length"])
    pad = settings.get("padding")
    if pad:
        length = pad.get("length") if pad.get("strategy") == "fixed" else None
        tok.enable_padding(pad_id=pad_id, pad_token="[PAD]", length=length,
                           pad_to_multiple_of=pad.get("pad_to_multiple_of"))
    return tok
