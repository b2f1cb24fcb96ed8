"""A tiny causal language model: rotary attention with non-persistent caches, tied embeddings."""
import torch.nn as nn

from .layers import Block, RotaryEmbedding
from .registry import register_model


class TinyLM(nn.Module):
    def __init__(self, vocab=100, dim=32, depth=2, heads=2, max_len=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rotary = RotaryEmbedding(dim // heads, max_len)
        self.blocks = nn.ModuleList([Block(dim, heads, init_values=0.1, rotary=self.rotary) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # tied

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))


@register_model
def tiny_lm(**kwargs):
    return TinyLM(**kwargs)
