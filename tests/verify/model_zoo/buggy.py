"""Buggy twins of the zoo's healthy models: each holds one bug that runtime verification proves."""
import torch
import torch.nn as nn

from .layers import Attention, Mlp


class PlainGammaBlock(nn.Module):
    """The first seed article's bug: the layer-scale gamma is a plain tensor, not an nn.Parameter."""

    def __init__(self, dim=32, init_values=1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = Mlp(dim)
        self.gamma_1 = torch.full((dim,), init_values, requires_grad=True)

    def forward(self, x):
        return x + self.gamma_1 * self.mlp(self.norm(x))


class ListStack(nn.Module):
    """Layers kept in a plain Python list: invisible to parameters(), state_dict() and .to()."""

    def __init__(self, dim=32, depth=2, num_classes=10):
        super().__init__()
        self.layers = [Mlp(dim) for _ in range(depth)]
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


class PlainRotary(nn.Module):
    """Rotary caches stored as plain tensors: .to(device) leaves them behind."""

    def __init__(self, head_dim, max_len=64, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        self.cos_cached = angles.cos()
        self.sin_cached = angles.sin()

    def forward(self, x):
        length = x.shape[-2]
        cos, sin = self.cos_cached[:length], self.sin_cached[:length]
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1)


class PlainRotaryLM(nn.Module):
    def __init__(self, vocab=100, dim=32, heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.attn = Attention(dim, heads, rotary=PlainRotary(dim // heads))
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        return self.lm_head(self.norm(x + self.attn(x)))


class DetachedGate(nn.Module):
    """A gate that never trains: it only ever reaches the output through .detach()."""

    def __init__(self, dim=32):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gate = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x + self.fc(x) * torch.sigmoid(self.gate.detach())
