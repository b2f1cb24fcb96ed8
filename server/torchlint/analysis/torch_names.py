"""What torchlint knows about torch by name alone (no torch import, ever).

Qualified names are canonical: ``torch.nn.Parameter``, never
``torch.nn.parameter.Parameter``; :func:`canonical` folds the long spellings.
"""
from __future__ import annotations

# torch.<name>(...) that build a new tensor.
TENSOR_FACTORIES = frozenset("""
tensor as_tensor asarray from_numpy frombuffer scalar_tensor
zeros ones empty full rand randn randint randperm normal bernoulli poisson multinomial
arange range linspace logspace eye tril triu tril_indices triu_indices diag diagflat
zeros_like ones_like empty_like full_like rand_like randn_like randint_like empty_strided
hann_window hamming_window blackman_window bartlett_window kaiser_window
cat concat concatenate stack hstack vstack outer ger kron cartesian_prod cdist
matmul mm bmm einsum exp log sin cos sqrt rsqrt sigmoid tanh softmax log_softmax where clamp
abs neg pow flip roll cumsum cumprod polar complex view_as_real view_as_complex
sparse_coo_tensor sparse_csr_tensor sparse_csc_tensor sparse_bsr_tensor sparse_bsc_tensor sparse_compressed_tensor
""".split())

# Factories whose result is usually a constant (mask, table, index): a buffer.
CONSTANT_FACTORIES = frozenset("""
tensor as_tensor asarray from_numpy frombuffer scalar_tensor ones zeros full arange range
linspace logspace eye tril triu tril_indices triu_indices diag diagflat ones_like zeros_like
full_like hann_window hamming_window blackman_window bartlett_window kaiser_window cartesian_prod
sparse_coo_tensor sparse_csr_tensor sparse_csc_tensor sparse_bsr_tensor sparse_bsc_tensor sparse_compressed_tensor
""".split())

# Legacy typed constructors (TL301): name -> dtype of the modern spelling.
TYPED_CONSTRUCTORS = {
    "FloatTensor": "torch.float32",
    "DoubleTensor": "torch.float64",
    "HalfTensor": "torch.float16",
    "BFloat16Tensor": "torch.bfloat16",
    "ByteTensor": "torch.uint8",
    "CharTensor": "torch.int8",
    "ShortTensor": "torch.int16",
    "IntTensor": "torch.int32",
    "LongTensor": "torch.int64",
    "BoolTensor": "torch.bool",
}

LEGACY_CONSTRUCTORS = frozenset(
    ["torch." + n for n in TYPED_CONSTRUCTORS]
    + ["torch.cuda." + n for n in TYPED_CONSTRUCTORS]
    + ["torch.Tensor", "torch.autograd.Variable"]
)

# Tensor methods that return a copy moved to another device or dtype: on a
# tensor they do nothing in place (TL203); on a Parameter they return a plain
# tensor (TL103). On a Module the same names move the module in place.
MOVE_METHODS = frozenset("""
to cuda cpu float double half bfloat16 long int short byte char bool type
""".split())
# The calls among them (and type_as) whose result may be on another device than the tensor.
DEVICE_MOVES = frozenset(["to", "cuda", "cpu", "type", "type_as"])

# Tensor methods (and properties) that return a tensor when called on one.
TENSOR_METHODS = MOVE_METHODS | frozenset("""
detach clone contiguous view view_as reshape reshape_as t transpose permute unsqueeze squeeze
expand expand_as repeat repeat_interleave flatten unflatten narrow select index_select
masked_fill gather sum mean std var prod max min amax amin norm exp log sqrt rsqrt abs neg
sigmoid tanh softmax log_softmax relu clamp clip pow matmul mm bmm add sub mul div
float_power cumsum cumprod flip roll tril triu diag outer masked_select sign reciprocal
requires_grad_ fill_ zero_ normal_ uniform_ copy_ clamp_ mul_ add_ div_ sub_ pin_memory
new_tensor new_zeros new_ones new_empty new_full square sin cos to_sparse to_sparse_coo to_sparse_csr to_dense coalesce
""".split())
TENSOR_PROPERTIES = frozenset(["T", "mT", "H", "mH", "data", "grad", "real", "imag"])

# torch.nn classes that are not Modules.
NN_NON_MODULES = frozenset([
    "torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.UninitializedParameter",
    "torch.nn.UninitializedBuffer", "torch.nn.Module",
])

# Parameters that standard layers register, by layer: what `layer.weight = t`
# would collide with.
LAYER_PARAMETERS = {
    "torch.nn.Linear": ("weight", "bias"),
    "torch.nn.LazyLinear": ("weight", "bias"),
    "torch.nn.Bilinear": ("weight", "bias"),
    "torch.nn.Embedding": ("weight",),
    "torch.nn.EmbeddingBag": ("weight",),
    "torch.nn.PReLU": ("weight",),
    "torch.nn.LayerNorm": ("weight", "bias"),
    "torch.nn.GroupNorm": ("weight", "bias"),
    "torch.nn.RMSNorm": ("weight",),
    "torch.nn.MultiheadAttention": ("in_proj_weight", "in_proj_bias"),
}
for _dims in ("1d", "2d", "3d"):
    for _layer in ("Conv", "ConvTranspose", "LazyConv", "BatchNorm", "InstanceNorm", "LazyBatchNorm"):
        LAYER_PARAMETERS["torch.nn." + _layer + _dims] = ("weight", "bias")

# Layers whose forward does not return one plain tensor (tuples, inputs, anything).
NON_TENSOR_FORWARD = frozenset("torch.nn." + n for n in """
Module Sequential ModuleList ModuleDict ParameterList ParameterDict Identity RNN LSTM GRU RNNCell LSTMCell GRUCell
MultiheadAttention AdaptiveLogSoftmaxWithLoss DataParallel Unflatten
""".split())

MODULE_BASES = frozenset([
    "torch.nn.Module",
    "pytorch_lightning.LightningModule",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
])

# torch's data loader: with its default collate, what a batch unpacks into are tensors.
DATA_LOADERS = frozenset(["torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"])

# Names that read like a learnable weight: TL101 prefers nn.Parameter for them.
WEIGHT_LIKE_NAMES = ("weight", "bias", "gamma", "beta", "alpha", "scale", "logit", "temperature",
                     "embedding", "kernel", "param", "theta", "coef", "query", "token")


def canonical(qualified: str) -> str:
    """Fold submodule spellings: torch.nn.modules.linear.Linear -> torch.nn.Linear."""
    parts = qualified.split(".")
    if len(parts) >= 4 and parts[:3] == ["torch", "nn", "modules"]:
        return "torch.nn." + parts[-1]
    if qualified in ("torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer",
                     "torch.nn.parameter.UninitializedParameter"):
        return "torch.nn." + parts[-1]
    if qualified == "torch.autograd.variable.Variable":
        return "torch.autograd.Variable"
    if qualified.startswith("torch.functional."):
        return "torch." + parts[-1]
    return qualified


def is_module_class(qualified: str) -> bool:
    """A torch.nn layer class (nn.Linear, nn.ModuleList...), not Parameter."""
    if qualified in NN_NON_MODULES:
        return False
    if qualified.startswith("torch.nn.") and qualified.count(".") == 2:
        return qualified.rsplit(".", 1)[1][:1].isupper()
    return False


def is_optimizer_class(qualified: str) -> bool:
    if not qualified.startswith("torch.optim.") or qualified.count(".") != 2:
        return False
    name = qualified.rsplit(".", 1)[1]
    return name[:1].isupper() and name != "Optimizer"


# torch.sparse.FloatTensor(indices, values, size) and its kin: old spellings of sparse_coo_tensor
# (not TL301's: torch.tensor is no replacement).
SPARSE_CONSTRUCTORS = frozenset("torch.sparse." + n for n in TYPED_CONSTRUCTORS)


def is_tensor_factory(qualified: str) -> bool:
    if qualified in LEGACY_CONSTRUCTORS or qualified in SPARSE_CONSTRUCTORS:
        return True
    if qualified.startswith("torch.") and qualified.count(".") == 1:
        return qualified[6:] in TENSOR_FACTORIES
    if qualified.startswith("torch.nn.functional."):
        name = qualified.rsplit(".", 1)[1]
        return name[:1].islower() and not name.startswith("_")
    return False
