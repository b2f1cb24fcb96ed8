"""Top-1 mixture-of-experts layers: with a small batch, most experts get no tokens."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import Mlp


class Top1MoE(nn.Module):
    """Every expert runs on its share of the tokens, an empty one included."""

    def __init__(self, dim=16, num_experts=8, hidden=32):
        super().__init__()
        self.router = nn.Linear(dim, num_experts)
        self.experts = nn.ModuleList([Mlp(dim, hidden) for _ in range(num_experts)])

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        gate, index = F.softmax(self.router(tokens), dim=-1).max(dim=-1)
        out = torch.zeros_like(tokens)
        for number, expert in enumerate(self.experts):
            chosen = index == number
            out[chosen] = expert(tokens[chosen]) * gate[chosen, None]
        return out.reshape(x.shape)


class SparseMoEBlock(nn.Module):
    """Experts without tokens are skipped (the usual fast path), behind a residual and a norm."""

    def __init__(self, dim=16, num_experts=8, hidden=32):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.router = nn.Linear(dim, num_experts)
        self.experts = nn.ModuleList([Mlp(dim, hidden) for _ in range(num_experts)])

    def forward(self, x):
        tokens = self.norm(x).reshape(-1, x.shape[-1])
        gate, index = F.softmax(self.router(tokens), dim=-1).max(dim=-1)
        out = torch.zeros_like(tokens)
        for number, expert in enumerate(self.experts):
            chosen = index == number
            if not chosen.any():
                continue
            out[chosen] = expert(tokens[chosen]) * gate[chosen, None]
        return x + out.reshape(x.shape)
