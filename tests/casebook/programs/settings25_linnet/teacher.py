"""The frozen song-continuation teacher: a small GPT-2 style causal LM over syllables, fitted briefly to
the catalogue grammar at start-up, then used only to continue recorded song fragments."""
import torch
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel
from transformers.utils import logging as hf_logging

from songs import SPECIAL


def build_teacher(cfg, catalogue, rng):
    hf_logging.set_verbosity_error()
    t, c = cfg.teacher, cfg.corpus
    config = GPT2Config(vocab_size=c.syllables + SPECIAL, n_positions=128, n_embd=t.width, n_layer=t.layers,
                        n_head=t.heads, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                        use_cache=t.use_cache, attn_implementation=t.attn_implementation)
    model = GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(t.warm_start_steps):
        seq, _ = catalogue.sample(rng, 64, c.prompt_len + t.new_syllables)
        ids = torch.from_numpy(seq)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    gen = GenerationConfig(max_new_tokens=t.new_syllables, min_new_tokens=t.new_syllables,
                           do_sample=t.do_sample, top_k=t.top_k, temperature=t.temperature,
                           use_cache=t.use_cache, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return model, gen


def continue_songs(model, gen, prompts):
    with torch.inference_mode():
        return model.generate(prompts, attention_mask=torch.ones_like(prompts), generation_config=gen)
