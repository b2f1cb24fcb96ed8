"""Causal self-attention with two classic slips: the mask is a plain tensor (left
on the CPU by model.cuda()) and the heads live in a Python list."""
import math

import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, dim, head_dim):
        super().__init__()
        self.q = nn.Linear(dim, head_dim, bias=False)
        self.k = nn.Linear(dim, head_dim, bias=False)
        self.v = nn.Linear(dim, head_dim, bias=False)
        self.scale = head_dim ** -0.5  # a float: fine

    def forward(self, x, mask):
        q, k, v = self.q(x), self.k(x), self.v(x)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(mask[: x.size(1), : x.size(1)] == 0, -math.inf)
        return att.softmax(dim=-1) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, dim=64, n_heads=4, max_len=128):
        super().__init__()
        head_dim = dim // n_heads
        self.heads = [Head(dim, head_dim) for _ in range(n_heads)]
        self.proj = nn.Linear(dim, dim)
        self.mask = torch.tril(torch.ones(max_len, max_len))
        self.register_buffer("positions", torch.arange(max_len))  # registered: fine

    def forward(self, x):
        out = torch.cat([head(x, self.mask) for head in self.heads], dim=-1)
        return self.proj(out)


class MixtureOfExperts(nn.Module):
    def __init__(self, dim=64, n_experts=4):
        super().__init__()
        self.experts = []
        for _ in range(n_experts):
            self.experts.append(nn.Linear(dim, dim))
        self.gates = [nn.Parameter(torch.zeros(dim)) for _ in range(n_experts)]

    def forward(self, x):
        return sum(expert(x) * gate for expert, gate in zip(self.experts, self.gates))
