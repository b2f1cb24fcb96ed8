"""Three slips that only show on the GPU or under DDP: a position index made on the CPU in
forward, hand-made weights that are not leaves, and a head that forward never runs."""
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class TinyGPT(nn.Module):
    def __init__(self, vocab=100, dim=32, block_size=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block_size, dim)
        self.lm_head = nn.Linear(dim, vocab)
        self.value_head = nn.Linear(dim, 1)  # left over from an RL experiment: never used

    def forward(self, idx):
        positions = torch.arange(idx.shape[1])  # made on the CPU: fails once idx is on the GPU
        return self.lm_head(self.tok(idx) + self.pos(positions))


# A linear probe written by hand: both "weights" are results of an operation, not leaves.
w = torch.randn(32, 10, requires_grad=True).to(device)
b = torch.zeros(10, requires_grad=True) * 1.0
probe_optimizer = torch.optim.SGD([w, b], lr=0.1)
