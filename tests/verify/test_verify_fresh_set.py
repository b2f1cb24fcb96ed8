"""Verify with no flags on the shapes a fresh set of real model files showed (issue #44, the
planted-bugs benchmark): a position cache that forward moves to its inputs' device itself, a
guess that fits but leaves an attention's parameters with all-zero gradients (a sequence of
one), constructor parameters read by more of their names, a ``device="cuda"`` default on a
machine without CUDA, a diffusion step argument, a guess an elementwise op resized, the
dimensions forward unpacks given to a convolution the data flow cannot reach, a config object,
a lambda that runs the module's layers, an image size and a frame size the constructor states, a graph
layer's features (its weight's size) with a square adjacency, a residual block's expansion,
an argument forward allows to be None, an unsqueezed spectrogram, and a kernel's own size. The models are
written here. Each test fails on the code before this work; one child process for the file.
"""
from __future__ import annotations

import re

import pytest

from torchlint.verify import verify_file
from torchlint.verify.report import COMPLETED

from verify_helpers import check, class_report, cuda_available, line_of, torch_python, write_module

MODELS = '''
import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F


class CachedTable(nn.Module):
    """A fixed table kept as a plain attribute, that forward moves to its input's dtype and device."""

    def __init__(self, dim=8, length=64):
        super().__init__()
        self.table = torch.arange(length * dim, dtype=torch.float32).view(1, length, dim) / 100.0
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        if self.table.dtype != x.dtype or self.table.device != x.device:
            self.table = self.table.to(dtype=x.dtype, device=x.device)
        return self.proj(x + self.table[:, :x.size(1)])


class StaleTable(nn.Module):
    def __init__(self, dim=8, length=64):
        super().__init__()
        self.table = torch.ones(1, length, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x) * self.table[:, :x.size(1)].to(x.dtype)


class WindowAttention(nn.Module):
    """Attends from each query position over a memory of 2 * length - 1 positions."""

    def __init__(self, dim=16):
        super().__init__()
        self.dim = dim
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.offset = nn.Parameter(torch.randn(dim) * 0.1)

    def forward(self, x, memory):
        batch = x.size(0)
        q = self.query(x).view(batch, -1, self.dim) + self.offset
        k = self.key(memory).view(batch, -1, self.dim)
        v = self.value(memory).view(batch, -1, self.dim)
        if k.size(1) != 2 * q.size(1) - 1:
            raise ValueError("the memory must hold 2 * length - 1 positions")
        weights = torch.softmax(q @ k.transpose(1, 2) / self.dim ** 0.5, dim=-1)
        return weights @ v


class WindowBlock(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attention = WindowAttention(dim)

    def forward(self, x):
        h = self.norm(x)
        memory = torch.cat([h, h[:, 1:].flip(1)], dim=1)
        return x + self.attention(h, memory)


class Policy(nn.Module):
    def __init__(self, state_dim, action_dim, max_action):
        super().__init__()
        self.body = nn.Linear(state_dim, 64)
        self.head = nn.Linear(64, action_dim)
        self.max_action = max_action

    def forward(self, state):
        return self.max_action * torch.tanh(self.head(torch.relu(self.body(state))))


class FieldModel(nn.Module):
    def __init__(self, field_dims, embed_dim, mlp_dims, dropouts):
        super().__init__()
        starts = [0] + list(itertools.accumulate(field_dims))[:-1]
        self.register_buffer("starts", torch.tensor(starts).unsqueeze(0))
        self.embedding = nn.Embedding(sum(field_dims), embed_dim)
        layers = []
        width = len(field_dims) * embed_dim
        for size, p in zip(mlp_dims, dropouts):
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(p)]
            width = size
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x):
        return self.mlp(self.embedding(x + self.starts).flatten(1))


class Denoiser(nn.Module):
    def __init__(self, dim=8, device="cuda"):
        super().__init__()
        self.device = device
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, t):
        steps = torch.arange(0, 8, 2, device=self.device).float()
        phases = t.unsqueeze(-1) * steps
        return self.fc(x) + torch.cat([phases.sin(), phases.cos()], dim=-1)


class FoldedConv(nn.Module):
    """A 1-D signal folded into 2-D by a period, as multi-period audio discriminators do."""

    def __init__(self, period=2):
        super().__init__()
        self.period = period
        self.convs = nn.ModuleList([nn.Conv2d(1, 4, (3, 1), padding=(1, 0)),
                                    nn.Conv2d(4, 4, (3, 1), padding=(1, 0))])

    def forward(self, x):
        b, c, t = x.shape
        if t % self.period:
            x = F.pad(x, (0, self.period - t % self.period))
            t = x.shape[-1]
        x = x.view(b, c, t // self.period, self.period)
        for conv in self.convs:
            x = torch.relu(conv(x))
        return x.flatten(1)


class ConfiguredAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.drop = nn.Dropout(config.attn_pdrop)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.drop(torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v)


class LambdaMixer(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.parts = nn.ModuleDict(dict(inner=nn.Linear(dim, dim), outer=nn.Linear(dim, dim)))
        parts = self.parts
        self.mix = lambda x: parts.outer(torch.relu(parts.inner(x)))

    def forward(self, x):
        return x + self.mix(x)


class PatchNet(nn.Module):
    def __init__(self, img_size=16, in_chans=3, patch=4, dim=12):
        super().__init__()
        self.patch = patch
        self.proj = nn.Linear(in_chans * patch * patch, dim)
        self.pos = nn.Parameter(torch.zeros(1, (img_size // patch) ** 2, dim))

    def forward(self, x):
        p = self.patch
        patches = x.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2)
        return self.proj(patches) + self.pos


class FrameEncoder(nn.Module):
    def __init__(self, input_dim=20, dim=8):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2)
        self.proj = nn.Linear(4 * ((input_dim - 3) // 2 + 1), dim)

    def forward(self, inputs, input_lengths):
        x = self.conv(inputs.unsqueeze(1))
        b, c, t, f = x.shape
        return self.proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f)), (input_lengths - 3) // 2 + 1


class NodeAttention(nn.Module):
    def __init__(self, in_features=12, out_features=6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * 0.1)
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, h, links):
        wh = torch.mm(h, self.weight)
        scores = (wh @ wh.t()).masked_fill(links <= 0, -1e9)
        return torch.softmax(scores, dim=1) @ wh + self.bias


class EdgeLayer(nn.Module):
    def __init__(self, in_features=10, out_features=4):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * 0.1)
        self.score = nn.Parameter(torch.randn(2 * out_features) * 0.1)

    def forward(self, x, adj):
        wx = x @ self.weight
        edges = adj.nonzero().t()
        weights = torch.exp(-torch.relu(torch.cat([wx[edges[0]], wx[edges[1]]], dim=1) @ self.score))
        return torch.zeros_like(wx).index_add(0, edges[0], weights.unsqueeze(1) * wx[edges[1]])


class WideBottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes):
        super().__init__()
        self.reduce = nn.Conv2d(inplanes, planes, 1)
        self.expand = nn.Conv2d(planes, planes * self.expansion, 1)

    def forward(self, x):
        return torch.relu(x + self.expand(torch.relu(self.reduce(x))))


class LabelledDenoiser(nn.Module):
    def __init__(self, dim=8, num_classes=None):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        if num_classes is not None:
            self.labels = nn.Embedding(num_classes, dim)

    def forward(self, x, t, y):
        h = self.fc(x) + t.unsqueeze(-1)
        if y is not None:
            h = h + self.labels(y)
        return h


class Spectrogram(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2)

    def forward(self, features, feature_lengths):
        x = self.conv(features.unsqueeze(1))
        return x.flatten(2).mean(-1), torch.div(feature_lengths, 2, rounding_mode="floor")


class PairKernel(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.kernel = nn.Parameter(torch.randn(dim, dim) * 0.1)

    def forward(self, x):
        return torch.einsum("bnd,de,bne->bn", x, self.kernel, x)


class FrozenProjection(nn.Module):
    def __init__(self, in_features=10, out_features=4):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))

    def forward(self, x):
        return torch.mm(x, self.weight.detach()) + self.bias


class DilatedBlock(nn.Module):
    def __init__(self, h, channels, kernel_size=3, dilations=(1, 3, 5)):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, dilation=d, padding=(kernel_size * d - d) // 2)
            for d in dilations[:3])

    def forward(self, x):
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, 0.1))
        return x


class Upsampler(nn.Module):
    """Reads its sizes from a config object: per-stage lists zipped together, and per-block
    dilations as a list of lists."""
    stages = nn.ModuleList

    def __init__(self, h):
        super().__init__()
        self.pre = nn.Conv1d(20, h.initial_channels, 7, padding=3)
        self.ups = self.stages()
        self.blocks = nn.ModuleList()
        for i, (rate, kernel) in enumerate(zip(h.upsample_rates, h.upsample_kernel_sizes)):
            channels = h.initial_channels // 2 ** (i + 1)
            self.ups.append(nn.ConvTranspose1d(2 * channels, channels, kernel, rate))
            for kernel_size, dilations in zip(h.block_kernel_sizes, h.block_dilation_sizes):
                self.blocks.append(DilatedBlock(h, channels, kernel_size, dilations))
        self.per_stage = len(h.block_kernel_sizes)
        self.post = nn.Conv1d(channels, 1, 7, padding=3)

    def forward(self, x):
        x = self.pre(x)
        for i in range(len(self.ups)):
            x = self.ups[i](F.leaky_relu(x, 0.1))
            x = sum(self.blocks[i * self.per_stage + j](x) for j in range(self.per_stage)) / self.per_stage
        return torch.tanh(self.post(x))


class LeakyUpsampler(Upsampler):
    stages = list


class Critic(nn.Module):
    """Q(state, action): the action joins the first hidden layer's output."""

    def __init__(self, state_dim, action_dim):
        super().__init__()
        self.l1 = nn.Linear(state_dim, 40)
        self.l2 = nn.Linear(40 + action_dim, 30)
        self.l3 = nn.Linear(30, 1)

    def forward(self, state, action):
        q = F.relu(self.l1(state))
        q = F.relu(self.l2(torch.cat([q, action], 1)))
        return self.l3(q)


class Residual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return x + self.conv(x)


class Backbone(nn.Module):
    """Takes its block class and a count per stage: only its factories say which."""

    def __init__(self, num_classes, block, layers):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.stages = self.container(*[block(8) for _ in range(sum(layers))])
        self.head = nn.Linear(8, num_classes)

    container = nn.Sequential

    def forward(self, x):
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x)
        return self.head(x.mean((2, 3)))


class LeakyBackbone(Backbone):
    container = staticmethod(lambda *blocks: list(blocks))


def small_backbone(num_classes, pretrained=True):
    if pretrained:
        raise RuntimeError("would download weights")
    return Backbone(num_classes, Residual, [1, 1])


def small_leaky_backbone(num_classes, pretrained=True):
    if pretrained:
        raise RuntimeError("would download weights")
    return LeakyBackbone(num_classes, Residual, [1, 1])
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_module(tmp_path_factory.mktemp("fresh_set"), "fresh.py", MODELS)


@pytest.fixture(scope="module")
def report(models):
    result = verify_file(str(models), python=torch_python(), device="cpu", timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


def test_a_cache_forward_moves_to_its_inputs_device_itself_is_no_finding(report):
    cls = class_report(report, "CachedTable")
    assert cls.status == "verified" and cls.issues == [], cls.issues
    assert "1 tensor that forward moves to its inputs' dtype and device itself (table)" in check(cls, "TL901").summary


def test_a_table_forward_does_not_move_is_still_left_behind(report, models):
    cls = class_report(report, "StaleTable")
    assert {(i.code, i.severity) for i in cls.issues} == {("TL901", "warning"), ("TL902", "error")}
    assert {i.line for i in cls.issues} == {line_of(models, "self.table = torch.ones(1, length, dim)")}


def test_a_guess_that_leaves_an_attention_with_all_zero_gradients_gives_way_to_its_callers_inputs(report):
    cls = class_report(report, "WindowAttention")
    assert cls.status == "verified" and cls.issues == [], cls.issues
    assert "seen when WindowBlock.forward called it" in cls.inputs, cls.inputs
    assert class_report(report, "WindowBlock").issues == []


def test_constructor_parameters_read_by_more_names(report):
    policy = class_report(report, "Policy")
    assert policy.constructed_with["text"] == "Policy(state_dim=32, action_dim=32, max_action=1.0)", policy
    assert policy.status == "verified" and policy.issues == []
    fields = class_report(report, "FieldModel")
    assert re.fullmatch(r"FieldModel\(field_dims=\[(\d+), \1\], embed_dim=\1, mlp_dims=\[\1, \1\], "
                        r"dropouts=\[0\.0(, 0\.0)*\]\)", fields.constructed_with["text"]), fields
    assert fields.status == "verified" and fields.issues == [], fields
    # (2, 8) indices do not broadcast with the two fields' starts: resized to the size asked for
    assert fields.inputs.startswith("(2, 2) int64 (resized: (2, 8) int64"), fields.inputs


def test_a_cuda_default_is_built_on_the_cpu_without_cuda_and_a_step_argument_is_one_per_sample(report):
    cls = class_report(report, "Denoiser")
    assert cls.status == "verified" and cls.issues == [], cls
    if not cuda_available():
        assert cls.constructed_with["text"] == "Denoiser(device=cpu)", cls.constructed_with
    assert "(2, 8) float32, (2,) float32" in cls.inputs and "t one time step per sample" in cls.inputs, cls.inputs


def test_a_convolution_gets_the_dimensions_forward_unpacks(report):
    cls = class_report(report, "FoldedConv")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.inputs.startswith("(2, 1, 64) float32"), cls.inputs


def test_a_config_parameter_gets_an_object_whose_attributes_are_made_up_by_name(report):
    cls = class_report(report, "ConfiguredAttention")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.constructed_with["text"] == "ConfiguredAttention(config=a config made up by its attribute names)"


def test_layers_a_held_lambda_runs_are_used_by_forward(report):
    cls = class_report(report, "LambdaMixer")
    assert cls.status == "verified" and cls.issues == [], cls.issues
    summary = check(cls, "TL903").summary
    assert "never used" not in summary and "a function it holds, mix, runs its layers" in summary, summary


def test_an_image_model_without_a_convolution_gets_the_image_its_constructor_states(report):
    cls = class_report(report, "PatchNet")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.inputs.startswith("(2, 3, 16, 16) float32 (the image size and channels its constructor states"), \
        cls.inputs


def test_a_speech_encoder_gets_frames_of_the_feature_size_its_constructor_states_and_their_lengths(report):
    cls = class_report(report, "FrameEncoder")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.inputs.startswith("(2, 64, 20) float32, (2,) int64 (the feature size its constructor states"), \
        cls.inputs


def test_a_graph_layer_gets_features_its_weight_takes_and_a_square_adjacency(report):
    cls = class_report(report, "NodeAttention")
    assert cls.status == "verified" and not [i for i in cls.issues if i.severity != "info"], cls
    assert cls.inputs.startswith("(2, 12) float32, (2, 2) float32 (resized: (2, 12) float32, (2, 12) float32 "
                                 "(guessed from weight (a 12 x 6 parameter forward multiplies by)"), cls.inputs


def test_an_argument_named_adj_is_a_square_adjacency_of_the_nodes(report):
    cls = class_report(report, "EdgeLayer")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.inputs.startswith("(2, 10) float32, (2, 2) float32 (guessed from weight (a 10 x 4 parameter "
                                 "forward multiplies by), the first layer forward applies to x; adj an adjacency "
                                 "of the 2 nodes)"), cls.inputs


def test_a_residual_block_that_states_its_expansion_gets_matching_made_up_planes(report):
    cls = class_report(report, "WideBottleneck")
    assert cls.constructed_with["text"] == "WideBottleneck(inplanes=128, planes=32)", cls.constructed_with
    assert cls.status == "verified" and cls.issues == [], cls


def test_an_argument_forward_tests_against_none_is_also_tried_as_none(report):
    cls = class_report(report, "LabelledDenoiser")
    assert cls.status == "verified" and cls.issues == [], cls
    assert "(2, 8) float32, (2,) float32, NoneType" in cls.inputs and "y None, as forward allows" in cls.inputs


def test_a_single_channel_convolution_of_an_unsqueezed_argument_takes_one_axis_less(report):
    cls = class_report(report, "Spectrogram")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.inputs.startswith("(2, 64, 64) float32, (2,) int64 (guessed from conv = Conv2d(in_channels=1)"), \
        cls.inputs


def test_a_module_without_layers_gets_the_last_size_of_its_own_parameter(report):
    cls = class_report(report, "PairKernel")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.inputs.startswith("(2, 8, 6) float32 (the last size of a parameter of its own"), cls.inputs


def test_an_argument_multiplied_by_a_detached_parameter_still_gets_its_size_and_the_cut_is_found(report, models):
    cls = class_report(report, "FrozenProjection")
    assert cls.inputs.startswith("(2, 10) float32 (guessed from weight (a 10 x 4 parameter"), cls.inputs
    (issue,) = cls.issues
    assert (issue.code, issue.severity) == ("TL904", "warning") and "no gradient" in issue.message, issue
    assert issue.line == line_of(models, "self.weight = nn.Parameter(torch.randn(in_features, out_features))")


def test_a_config_whose_constructor_indexes_a_made_up_number_gets_that_list_nested(report):
    """The config's per-block dilations must be a list of lists; the per-stage lists zipped together
    have one length."""
    cls = class_report(report, "Upsampler")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.constructed_with["text"].startswith(
        "Upsampler(h=a made-up config with nested block_dilat"), cls  # the value cut at 40
    assert all(c.status == "passed" for c in cls.checks), cls.checks


def test_a_plain_list_of_layers_in_a_class_built_from_a_made_up_config_is_found_on_its_line(report, models):
    cls = class_report(report, "LeakyUpsampler")
    assert {(i.code, i.line) for i in cls.issues if i.severity in ("warning", "error")} >= {
        ("TL901", line_of(models, "self.ups = self.stages()"))}, cls.issues


def test_an_input_concatenated_beside_a_hidden_layer_is_resized_by_what_the_layer_found_too_wide(report):
    cls = class_report(report, "Critic")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.constructed_with["text"] == "Critic(state_dim=32, action_dim=32)", cls.constructed_with
    assert cls.inputs.startswith("(2, 32) float32, (2, 32) float32 (resized: "), cls.inputs


def test_a_class_only_factories_with_arguments_build_is_built_by_one_with_them_made_up(report):
    cls = class_report(report, "Backbone")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.constructed_with["text"] == "small_backbone(num_classes=10, pretrained=False)", cls.constructed_with
    assert cls.constructed_with["origin"].endswith("factory small_backbone(), its arguments made up"), cls


def test_a_plain_list_of_blocks_in_a_class_a_made_up_factory_builds_is_found_on_its_line(report, models):
    cls = class_report(report, "LeakyBackbone")
    assert cls.constructed_with["text"] == "small_leaky_backbone(num_classes=10, pretrained=False)", cls
    assert ("TL901", line_of(models, "self.stages = self.container(")) in {
        (i.code, i.line) for i in cls.issues if i.severity in ("warning", "error")}, cls.issues
