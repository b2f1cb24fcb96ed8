"""A sinusoidal positional encoding whose table was first kept as a plain attribute, then
registered as a buffer when someone noticed .to() left it on the CPU: building it now raises
KeyError "attribute 'pe' already exists" (TL107)."""
import math

import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int = 64, max_len: int = 512):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.pe = pe
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(1)]
