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


class DtypeMovedScale(nn.Module):
    """nn.Parameter(t).to(device=..., dtype=...): the attribute is a computed copy; the Parameter
    that receives the gradients is a hidden leaf nobody registered."""

    def __init__(self, dim=16, device=torch.device("cpu")):
        super().__init__()
        self.fc = nn.Linear(dim, dim).double()
        self.scale = nn.Parameter(torch.ones(dim)).to(device=device, dtype=torch.float64)

    def forward(self, x):
        return self.fc(x.double()) * self.scale


class NonLeafGate(nn.Module):
    """A gate computed in __init__ from a tensor that requires grad: the second backward() of a
    training loop fails (its graph was freed by the first)."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gate = torch.ones(dim, requires_grad=True) * 1e-4

    def forward(self, x):
        return x + self.gate * self.fc(x)


class LateHead(nn.Module):
    """The head is created on the first batch: an optimizer built before it never trains it."""

    def __init__(self, num_classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 20), nn.ReLU())
        self.head = None
        self.num_classes = num_classes

    def forward(self, x):
        x = self.body(x)
        if self.head is None:
            self.head = nn.Linear(x.shape[-1], self.num_classes)
        return self.head(x)


class RedecayedEachStep(nn.Module):
    """A decayed weight re-wrapped in a new nn.Parameter on every forward."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        out = self.fc(x) * self.scale
        self.scale = nn.Parameter(self.scale.detach() * 0.999)
        return out
