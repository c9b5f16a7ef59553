import json

from tokenizers import Tokenizer, models, pre_tokenizers, trainers


def train_vocabulary(lines, opts):
    tok = Tokenizer(models.BPE(unk_token=opts.unk_token))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(
        vocab_size=opts.vocab_size,
        special_tokens=[opts.unk_token, "[PAD]"],
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return model["vocab"], merges


def build_tokenizer(vocab, merges, opts):
    bpe = models.BPE(
        vocab=vocab,
        merges=merges,
        unk_token=opts.unk_token,
        cache_capacity=opts.word_cache,
    )
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    pad_id = vocab["[PAD]"]
    tok.enable_padding(pad_id=pad_id, pad_token="[PAD]", pad_to_multiple_of=opts.pad_multiple)
    tok.enable_truncation(max_length=opts.max_tokens)
    return tok, pad_id
