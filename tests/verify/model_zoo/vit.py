"""A small vision transformer: zero-initialised head after a final LayerNorm, layer scale,
and a distillation head that only the distilled variant uses."""
import torch
import torch.nn as nn

from .layers import Block
from .registry import register_model


class PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch=32, channels=3, dim=32):
        super().__init__()
        self.num_patches = (img_size // patch) ** 2
        self.proj = nn.Conv2d(channels, dim, patch, patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self, img_size=224, patch=32, dim=32, depth=2, heads=2, num_classes=10, distilled=False):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch, 3, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, self.patch_embed.num_patches + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.head_dist = nn.Linear(dim, num_classes)  # DeiT's distillation head: used when distilled
        self.distilled = distilled
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        if self.distilled:
            return self.head(x[:, 0]), self.head_dist(x[:, 0])
        return self.head(x[:, 0])


@register_model
def vit_tiny(**kwargs):
    return VisionTransformer(**kwargs)
