"""A training step of the package: the only place that says what MaskedEncoder takes."""
import torch

from .seq import MaskedEncoder


def train_step(steps=1):
    model = MaskedEncoder(dim=64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch, length = 2, 24
    x = torch.randn(batch, length, 64)
    mask = torch.ones(batch, length, dtype=torch.bool)
    for _ in range(steps):
        loss = model(x, mask=mask).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss
