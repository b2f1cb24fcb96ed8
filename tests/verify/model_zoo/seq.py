"""Sequence models whose example inputs are written in the code that calls them: several
tensor arguments (a padding mask, a class token), a block that unpacks ``B, N, C = x.shape``
over a fixed-length position table, and a first layer that is neither the first one defined
nor the widest. ``train.py`` and the ``__main__`` block below call them."""
import torch
import torch.nn as nn

from .layers import Attention, Mlp


class MaskedEncoder(nn.Module):
    """forward(x, mask): the padding mask is a bool tensor, so no guess shaped like x can work."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.attn = Attention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, mask):
        x = self.proj(x).masked_fill(~mask[..., None], 0.0)
        return self.norm(x + self.attn(x))


class ClsPool(nn.Module):
    """forward(x, cls_token): the class token is prepended, then pooled."""

    def __init__(self, dim=32, num_classes=5):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x, cls_token):
        x = torch.cat([cls_token, x], dim=1)
        return self.head(self.norm(x)[:, 0])


class TokenBlock(nn.Module):
    """Unpacks three dimensions; the position table fixes the sequence length at 24."""

    def __init__(self, dim=48, length=24, heads=4):
        super().__init__()
        self.heads = heads
        self.pos = nn.Parameter(torch.zeros(1, length, dim))
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        x = x + self.pos
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        weights = (q @ k.transpose(-2, -1) * (C // self.heads) ** -0.5).softmax(dim=-1)
        return x + self.out((weights @ v).transpose(1, 2).reshape(B, N, C))


class NarrowFirst(nn.Module):
    """The norm and the MLP are defined first; forward starts with the 40-wide input projection."""

    def __init__(self, width=40, dim=16):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, 4 * dim)
        self.embed = nn.Linear(width, dim)

    def forward(self, features):
        x = self.embed(features)
        return x + self.mlp(self.norm(x))


if __name__ == "__main__":
    model = ClsPool(dim=32)
    tokens = torch.randn(2, 24, 32)
    print(model(tokens, torch.zeros(2, 1, 32)).shape)
