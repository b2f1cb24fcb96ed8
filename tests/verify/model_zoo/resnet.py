"""ResNets with the zero-initialised last BatchNorm of each residual branch (Goyal et al.)."""
import torch
import torch.nn as nn

from .registry import register_model


def conv_bn(in_channels, out_channels, kernel=3, stride=1):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel, stride, kernel // 2, bias=False),
        nn.BatchNorm2d(out_channels),
    )


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_channels, channels, stride=1):
        super().__init__()
        self.conv1 = conv_bn(in_channels, channels, 3, stride)
        self.conv2 = conv_bn(channels, channels, 3)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != channels:
            self.shortcut = conv_bn(in_channels, channels, 1, stride)

    def last_bn(self):
        return self.conv2[1]

    def forward(self, x):
        return self.relu(self.conv2(self.relu(self.conv1(x))) + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels, channels, stride=1):
        super().__init__()
        out_channels = channels * self.expansion
        self.reduce = conv_bn(in_channels, channels, 1)
        self.conv = conv_bn(channels, channels, 3, stride)
        self.expand = conv_bn(channels, out_channels, 1)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = conv_bn(in_channels, out_channels, 1, stride)

    def last_bn(self):
        return self.expand[1]

    def forward(self, x):
        out = self.relu(self.reduce(x))
        out = self.relu(self.conv(out))
        return self.relu(self.expand(out) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, width=16, zero_init_residual=True):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1))
        stages, in_channels = [], width
        for index, depth in enumerate(layers):
            channels = width * 2 ** index
            blocks = []
            for number in range(depth):
                stride = 2 if index > 0 and number == 0 else 1
                blocks.append(block(in_channels, channels, stride))
                in_channels = channels * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        if zero_init_residual:
            # Each residual branch starts as the identity: its last BN's gamma is zero.
            for module in self.modules():
                if isinstance(module, (BasicBlock, Bottleneck)):
                    nn.init.zeros_(module.last_bn().weight)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


@register_model
def resnet_tiny(**kwargs):
    return ResNet(Bottleneck, [1, 1], **kwargs)


@register_model
def resnet_cifar():
    return ResNet(BasicBlock, [1, 1], num_classes=10)
