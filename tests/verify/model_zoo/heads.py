"""Healthy twins of buggy.py's training bugs: each is what the buggy one should have written."""
import torch
import torch.nn as nn


class DoubleScale(nn.Module):
    """A float64 scale made a parameter after the conversion (not before)."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = nn.Linear(dim, dim).double()
        self.scale = nn.Parameter(torch.ones(dim).to(dtype=torch.float64))

    def forward(self, x):
        return self.fc(x.double()) * self.scale


class LeafGate(nn.Module):
    """A small residual gate: the product is wrapped, so the gate is a leaf parameter."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gate = nn.Parameter(torch.ones(dim) * 1e-4)

    def forward(self, x):
        return x + self.gate * self.fc(x)


class LazyHeadNet(nn.Module):
    """The head's width comes from the input: nn.LazyLinear, created in __init__."""

    def __init__(self, num_classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 20), nn.ReLU())
        self.head = nn.LazyLinear(num_classes)

    def forward(self, x):
        return self.head(self.body(x))


class DecayedInPlace(nn.Module):
    """A decay kept in a buffer and updated in place before it is used: the optimizer keeps the
    same parameter on every step."""

    def __init__(self, dim=16):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.scale = nn.Parameter(torch.ones(dim))
        self.register_buffer("decay", torch.ones(()))

    def forward(self, x):
        with torch.no_grad():
            self.decay.mul_(0.999)
        return self.fc(x) * (self.scale * self.decay)
