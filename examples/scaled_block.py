"""A residual block with a learnable layer-scale, written as in the article "Why can't I use a
torch.cuda.FloatTensor as the gamma_1 parameter?": gamma_1 is a raw CUDA tensor, never trained."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ScaledBlock(nn.Module):
    def __init__(self, dim: int, hidden: int = 4):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * hidden)
        self.fc2 = nn.Linear(dim * hidden, dim)
        self.gamma_1 = torch.cuda.FloatTensor([1.0])  # learnable layer-scale... or so it seems
        self.temperature = torch.ones(1, requires_grad=True)

    def forward(self, x):
        h = self.fc2(F.gelu(self.fc1(self.norm(x))))
        return x + self.gamma_1 * h / self.temperature


class IncorrectLinear(nn.Module):
    """Weights stored as plain tensors, from the article "Can a fixed PyTorch tensor be a parameter of a PyTorch module?"."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = torch.randn(out_features, in_features)
        self.bias = torch.randn(out_features)

    def forward(self, x):
        return torch.matmul(x, self.weight.T) + self.bias
