"""Building blocks shared by the zoo's models."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerScale(nn.Module):
    """Per-channel residual gate (CaiT): a trainable gamma that starts small."""

    def __init__(self, dim, init_values=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class Mlp(nn.Module):
    def __init__(self, dim, hidden=None, out=None, drop=0.0):
        super().__init__()
        hidden = hidden or 4 * dim
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden, out or dim)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


class RotaryEmbedding(nn.Module):
    """Rotary position caches: derived from the sizes, so kept out of state_dict (persistent=False)."""

    def __init__(self, head_dim, max_len=64, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        self.register_buffer("cos_cached", angles.cos(), persistent=False)
        self.register_buffer("sin_cached", angles.sin(), persistent=False)

    def forward(self, x):
        length = x.shape[-2]
        cos, sin = self.cos_cached[:length], self.sin_cached[:length]
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads=2, rotary=None):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.rotary = rotary

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        weights = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        out = F.softmax(weights, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(batch, length, dim))


class Block(nn.Module):
    """A pre-norm transformer block with layer scale on both branches."""

    def __init__(self, dim, heads=2, init_values=1e-5, rotary=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, rotary)
        self.ls1 = LayerScale(dim, init_values)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim)
        self.ls2 = LayerScale(dim, init_values)

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))
