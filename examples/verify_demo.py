"""Run me for real: `torchlint verify examples/verify_demo.py`.

LayerScaleBlock is the layer-scale gamma_1 bug of scaled_block.py, written so that it builds
on any machine: the layer-scale is a raw tensor with requires_grad, not an
nn.Parameter. It receives a gradient in backward(), but model.parameters() does not
contain it, so the optimizer never changes it. FixedLayerScaleBlock is the same
block done right; torchlint verify finds nothing to say about it.

example_inputs() below is the example-input factory torchlint verify calls: it gets
the module it is about to run and returns the arguments for its forward().
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerScaleBlock(nn.Module):
    def __init__(self, dim: int = 16, hidden: int = 4):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * hidden)
        self.fc2 = nn.Linear(dim * hidden, dim)
        # Looks learnable, is not: a plain tensor is never registered as a parameter.
        self.gamma_1 = torch.full((dim,), 1e-2).requires_grad_(True)

    def forward(self, x):
        return x + self.gamma_1 * self.fc2(F.gelu(self.fc1(self.norm(x))))


class FixedLayerScaleBlock(nn.Module):
    def __init__(self, dim: int = 16, hidden: int = 4):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * hidden)
        self.fc2 = nn.Linear(dim * hidden, dim)
        self.gamma_1 = nn.Parameter(torch.full((dim,), 1e-2))

    def forward(self, x):
        return x + self.gamma_1 * self.fc2(F.gelu(self.fc1(self.norm(x))))


def example_inputs(module):
    """A batch of 2 token sequences of length 5 whose width fits the block."""
    return (torch.randn(2, 5, module.norm.normalized_shape[0]),)


if __name__ == "__main__":
    model = LayerScaleBlock()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(*example_inputs(model)).sum().backward()
    optimizer.step()
    print("gamma_1 has a gradient:", model.gamma_1.grad is not None)
    print("gamma_1 is trained:", any(p is model.gamma_1 for p in model.parameters()))
