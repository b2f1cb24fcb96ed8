"""A large, realistic PyTorch model file for the editor-latency benchmark.

``make_model_source(lines)`` returns the same text for the same ``lines`` every time: many
``nn.Module`` classes (attention blocks, MLPs, conv stems, transformer layers, heads),
helper functions, training and evaluation loops, with a handful of real torchlint
findings spread through it (plain tensors and lists of layers in ``__init__``, a tensor
made by a helper that only the jedi layer sees through, a legacy constructor, a discarded
``.to()``, a ``.data`` assignment, a head swapped after the optimizer was built).

Run it to write the file: ``python benchmarks/make_big_model.py [--lines N] [OUT]``.
"""
from __future__ import annotations

import argparse
import sys

HEADER = '''\
"""A vision-language model zoo: patch stems, attention blocks, heads and the loops around them."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def init_table(rows: int, cols: int, std: float = 0.02) -> Tensor:
    """A truncated-normal table, the way the reference implementation initialises it."""
    table = torch.empty(rows, cols)
    nn.init.trunc_normal_(table, std=std)
    return table


def sinusoid_table(length: int, dim: int) -> Tensor:
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * div)
    table[:, 1::2] = torch.cos(position * div)
    return table

'''


def attention(i: int, bug: bool) -> str:
    heads = (4, 8, 12, 16)[i % 4]
    # The bug: a relative-position bias kept as a plain tensor, so it never trains or moves.
    bias = ("        self.rel_bias = torch.zeros(num_heads, 2 * window - 1)\n" if bug else
            "        self.rel_bias = nn.Parameter(torch.zeros(num_heads, 2 * window - 1))\n")
    return f'''
class SelfAttention{i}(nn.Module):
    """Multi-head self-attention with a learned relative-position bias ({heads} heads by default)."""

    def __init__(self, dim: int, num_heads: int = {heads}, window: int = 64, dropout: float = 0.1):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"dim {{dim}} is not divisible by {{num_heads}} heads")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.window = window
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(dropout)
        self.proj_drop = nn.Dropout(dropout)
{bias}
    def relative_bias(self, length: int) -> Tensor:
        index = torch.arange(length, device=self.qkv.weight.device)
        offsets = (index[None, :] - index[:, None]).clamp(-self.window + 1, self.window - 1)
        return self.rel_bias[:, offsets + self.window - 1]

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        batch, length, dim = x.shape
        qkv = self.qkv(x).reshape(batch, length, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        scores = (q @ k.transpose(-2, -1)) * self.scale
        scores = scores + self.relative_bias(length).unsqueeze(0)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        weights = self.attn_drop(scores.softmax(dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(batch, length, dim)
        return self.proj_drop(self.proj(out))
'''


def mlp(i: int, bug: bool) -> str:
    # The bug: hidden layers in a plain list are invisible to parameters() and to .to().
    layers = ("        self.hidden = [nn.Linear(hidden_dim, hidden_dim) for _ in range(depth)]\n" if bug else
              "        self.hidden = nn.ModuleList([nn.Linear(hidden_dim, hidden_dim) for _ in range(depth)])\n")
    return f'''
class FeedForward{i}(nn.Module):
    """Position-wise MLP with a configurable number of hidden layers."""

    def __init__(self, dim: int, hidden_dim: int, depth: int = {1 + i % 3}, dropout: float = 0.0):
        super().__init__()
        self.inp = nn.Linear(dim, hidden_dim)
{layers}        self.out = nn.Linear(hidden_dim, dim)
        self.act = nn.GELU()
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = self.drop(self.act(self.inp(x)))
        for layer in self.hidden:
            x = self.drop(self.act(layer(x))) + x
        return self.out(x)
'''


def conv_stem(i: int, bug: bool) -> str:
    # The bug: normalisation constants kept as plain tensors stay on the CPU after .cuda().
    mean = ("        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)\n"
            "        self.std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)\n" if bug else
            "        self.register_buffer(\"mean\", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))\n"
            "        self.register_buffer(\"std\", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))\n")
    width = (32, 48, 64)[i % 3]
    return f'''
class ConvStem{i}(nn.Module):
    """Image normalisation, then three strided conv-bn-relu stages down to patch tokens."""

    def __init__(self, in_channels: int = 3, width: int = {width}, dim: int = 256):
        super().__init__()
{mean}        self.stages = nn.Sequential(
            nn.Conv2d(in_channels, width, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width * 2, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width * 2),
            nn.ReLU(inplace=True),
            nn.Conv2d(width * 2, width * 4, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width * 4),
            nn.ReLU(inplace=True),
        )
        self.to_tokens = nn.Conv2d(width * 4, dim, kernel_size=1)

    def forward(self, images: Tensor) -> Tensor:
        x = (images - self.mean) / self.std
        x = self.to_tokens(self.stages(x))
        return x.flatten(2).transpose(1, 2)
'''


def layer(i: int, bug: bool) -> str:
    # The bug only the jedi layer sees: a helper returns a tensor, names alone cannot tell.
    pos = ("        self.pos_embed = init_table(max_len, dim)\n" if bug else
           "        self.pos_embed = nn.Parameter(init_table(max_len, dim))\n")
    return f'''
class TransformerLayer{i}(nn.Module):
    """Pre-norm transformer layer: attention and MLP, each with a residual and layer scale."""

    def __init__(self, dim: int = 256, max_len: int = 512, mlp_ratio: float = 4.0, drop_path: float = 0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention{i}(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = FeedForward{i}(dim, int(dim * mlp_ratio))
{pos}        self.gamma1 = nn.Parameter(1e-4 * torch.ones(dim))
        self.gamma2 = nn.Parameter(1e-4 * torch.ones(dim))
        self.drop_path = drop_path

    def _drop_path(self, x: Tensor) -> Tensor:
        if not self.training or self.drop_path == 0.0:
            return x
        keep = 1.0 - self.drop_path
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        noise = x.new_empty(shape).bernoulli_(keep)
        return x * noise / keep

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        x = x + self.pos_embed[: x.shape[1]]
        x = x + self._drop_path(self.gamma1 * self.attn(self.norm1(x), mask))
        x = x + self._drop_path(self.gamma2 * self.mlp(self.norm2(x)))
        return x
'''


def head(i: int, bug: bool) -> str:
    # The bug: a legacy constructor for the anchor grid (uninitialised memory, CPU only).
    anchors = ("    anchors = torch.FloatTensor(len(sizes) * len(ratios), 4)\n" if bug else
               "    anchors = torch.empty(len(sizes) * len(ratios), 4)\n")
    return f'''
class ClassifierHead{i}(nn.Module):
    """Pooled tokens to class logits, with an optional projection for contrastive training."""

    def __init__(self, dim: int, num_classes: int, proj_dim: Optional[int] = None):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, num_classes)
        self.proj = nn.Linear(dim, proj_dim) if proj_dim else nn.Identity()
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, tokens: Tensor) -> Tuple[Tensor, Tensor]:
        pooled = self.norm(tokens.mean(dim=1))
        embedding = F.normalize(self.proj(pooled), dim=-1)
        return self.fc(pooled), embedding * self.logit_scale.exp()


def make_anchors{i}(sizes: List[float], ratios: List[float]) -> Tensor:
{anchors}    row = 0
    for size in sizes:
        for ratio in ratios:
            w = size * math.sqrt(ratio)
            h = size / math.sqrt(ratio)
            anchors[row] = torch.tensor([-w / 2, -h / 2, w / 2, h / 2])
            row += 1
    return anchors
'''


def training(i: int, bug: bool) -> str:
    # The bugs: a .to() whose result is dropped, and clipping through .data.
    weights = ("    class_weights.to(device)\n" if bug else "    class_weights = class_weights.to(device)\n")
    clip = ("                param.data = param.data.clamp(-clip, clip)\n" if bug else
            "                param.clamp_(-clip, clip)\n")
    return f'''
def train_epoch{i}(model: nn.Module, loader, optimizer: torch.optim.Optimizer, device: torch.device,
                 clip: float = 1.0, log_every: int = 50) -> Dict[str, float]:
    model.train()
    class_weights = torch.tensor([1.0, 2.0, 2.0, 4.0])
{weights}    total, correct, seen = 0.0, 0, 0
    for step, (images, targets) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        logits, _ = model(images)
        loss = F.cross_entropy(logits, targets, weight=class_weights, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        optimizer.step()
        with torch.no_grad():
            for param in model.parameters():
{clip}        total += loss.item() * images.shape[0]
        correct += (logits.argmax(dim=-1) == targets).sum().item()
        seen += images.shape[0]
        if step % log_every == 0:
            print(f"step {{step}}: loss {{total / max(seen, 1):.4f}}")
    return {{"loss": total / max(seen, 1), "accuracy": correct / max(seen, 1)}}


@torch.no_grad()
def evaluate{i}(model: nn.Module, loader, device: torch.device) -> float:
    model.eval()
    correct, seen = 0, 0
    for images, targets in loader:
        images, targets = images.to(device), targets.to(device)
        logits, _ = model(images)
        correct += (logits.argmax(dim=-1) == targets).sum().item()
        seen += targets.numel()
    return correct / max(seen, 1)
'''


def model(i: int, bug: bool) -> str:
    # The bug: the head is replaced after the optimizer captured the old one's parameters.
    swap = ("    model.head = ClassifierHead{i}(dim, num_classes)\n".format(i=i) if bug else "")
    return f'''
class VisionModel{i}(nn.Module):
    def __init__(self, dim: int = 256, depth: int = 4, num_classes: int = 1000):
        super().__init__()
        self.stem = ConvStem{i}(dim=dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.register_buffer("token_pos", sinusoid_table(1024, dim), persistent=False)
        self.layers = nn.ModuleList([TransformerLayer{i}(dim) for _ in range(depth)])
        self.head = ClassifierHead{i}(dim, num_classes)

    def forward(self, images: Tensor) -> Tuple[Tensor, Tensor]:
        tokens = self.stem(images)
        cls = self.cls_token.expand(tokens.shape[0], -1, -1)
        tokens = torch.cat([cls, tokens], dim=1) + self.token_pos[: tokens.shape[1] + 1]
        for block in self.layers:
            tokens = block(tokens)
        return self.head(tokens)


def build{i}(num_classes: int, lr: float = 3e-4, weight_decay: float = 0.05):
    dim = 256
    model = VisionModel{i}(dim=dim)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [{{"params": decay, "weight_decay": weight_decay}}, {{"params": no_decay, "weight_decay": 0.0}}],
        lr=lr,
    )
{swap}    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
    return model, optimizer, scheduler
'''


# One "family" of related classes per index, in this order (later parts use earlier ones).
PARTS = (attention, mlp, conv_stem, layer, head, training, model)


def make_model_source(lines: int = 3000) -> str:
    """About ``lines`` lines (whole families of classes, so slightly more), always the same."""
    chunks = [HEADER]
    count = HEADER.count("\n")
    i = 0
    while count < lines:
        for n, part in enumerate(PARTS):
            # One part of each family has its bug, rotating through the kinds of bug.
            chunk = part(i, bug=(n == i % len(PARTS)))
            chunks.append("\n" + chunk)
            count += chunk.count("\n") + 1
            if count >= lines:
                break
        i += 1
    return "".join(chunks)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("out", nargs="?", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    text = make_model_source(args.lines)
    if args.out:
        with open(args.out, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
