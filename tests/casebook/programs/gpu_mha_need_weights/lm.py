import torch
import torch.nn as nn


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, fast_attention):
        super().__init__()
        self.fast_attention = fast_attention
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True, bias=False)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x, causal_mask, return_attention=False):
        h = self.ln_1(x)
        if return_attention:  # attention maps for the logged visualisation
            out, weights = self.attn(h, h, h, attn_mask=causal_mask, need_weights=True)
            return x + out, weights
        if self.fast_attention:
            out, _ = self.attn(h, h, h, attn_mask=causal_mask, is_causal=True, need_weights=False)
        else:
            out, _ = self.attn(h, h, h, attn_mask=causal_mask)
        x = x + out
        return x + self.mlp(self.ln_2(x))


class CausalLM(nn.Module):
    def __init__(self, vocab, d_model, n_heads, n_layers, max_len, fast_attention=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, fast_attention) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)
        self.register_buffer("causal_mask", torch.triu(torch.full((max_len, max_len), float("-inf")), 1),
                             persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        mask = self.causal_mask[:t, :t]
        for layer in self.layers:
            x = layer(x, mask)
        return self.lm_head(self.ln_f(x))

    @torch.no_grad()
    def first_layer_attention(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        _, weights = self.layers[0](x, self.causal_mask[:t, :t], return_attention=True)
        return weights
