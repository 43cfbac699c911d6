"""gingham: a portable deep-learning compiler.

Programs are written in Tile (``gingham.tile``); kernels are generated for the CPU (C), any
OpenCL device and CUDA.
"""

from . import tile
from .errors import (
    AutogradError,
    CheckpointError,
    DeviceError,
    DeviceMemoryError,
    DeviceNotFoundError,
    GinghamError,
    KernelCompileError,
    OnnxError,
    StateDictError,
    TileAffineError,
    TileConflictError,
    TileError,
    TileIndexError,
    TileNameError,
    TileShapeError,
    TileSyntaxError,
    TileTypeError,
    UnsupportedOpError,
)

from .frontend.tensor import (  # noqa: E402
    Tensor,
    arange,
    cat,
    concat,
    einsum,
    full,
    matmul,
    maximum,
    minimum,
    no_grad,
    ones,
    permute_dims,
    reshape,
    stack,
    tensor,
    where,
    zeros,
)
# elementwise math and reductions in PyTorch's function spelling (torch.atan2(y, x), ...)
from .frontend.tensor import (  # noqa: E402
    tan, sinh, cosh, asin, acos, atan, arcsin, arccos, arctan, asinh, acosh, atanh, arcsinh,
    arccosh, arctanh, log1p, expm1, exp2, log2, log10, atan2, arctan2, hypot, logaddexp,
    logaddexp2, fmod, remainder, copysign, trunc, fix, frac, isnan, isinf, isfinite, nan_to_num,
    lerp, addcmul, addcdiv, logsumexp, count_nonzero, nansum, nanmean, aminmax, gcd, lcm,
    nextafter,
)
from .frontend.tensor import (  # noqa: E402  (the layout ops: shapes, flips, diagonals)
    atleast_1d, atleast_2d, atleast_3d, column_stack, corrcoef, cross, diag, diagonal, diff, dstack,
    flip, fliplr, flipud, hstack, inner, kron, linspace, logspace, meshgrid, moveaxis, movedim,
    outer, repeat_interleave, roll, rot90, tensordot, trace, tril, triu, vstack,
)

from .frontend.indexing import (  # noqa: E402
    argsort,
    bincount,
    bucketize,
    gather,
    histc,
    histogram,
    histogramdd,
    index_add,
    index_reduce,
    index_select,
    isin,
    nanmedian,
    nanquantile,
    put,
    scatter,
    scatter_add,
    searchsorted,
    sort,
    take_along_dim,
    topk,
    unravel_index,
)
from .frontend.numerics import frexp, gradient  # noqa: E402  (beside ldexp, diff)
from .nn.functional import Generator, multinomial  # noqa: E402
# torch.manual_seed's: the device generators and parameter initialisation alike
from .nn import manual_seed  # noqa: E402
# torch.<method>(input, ...) for the Tensor methods of gingham.frontend.tensor.METHOD_FUNCTIONS
# (torch.sum, torch.max, torch.abs, ...: names a module-level def there would clash with builtins)
from .frontend.tensor import METHOD_FUNCTIONS as _METHOD_FUNCTIONS  # noqa: E402

globals().update(_METHOD_FUNCTIONS)
from .frontend.tensor import (  # noqa: E402  (PyTorch's creation, promotion and matrix helpers)
    as_tensor, asarray, block_diag, broadcast_shapes, broadcast_tensors, can_cast,
    cartesian_prod, cdist, chain_matmul, combinations, cov, cumulative_trapezoid, diag_embed,
    empty, empty_like, eye, fill, from_numpy, full_like, get_default_dtype, is_grad_enabled, is_tensor,
    ones_like, promote_types, result_type, rsub, scalar_tensor, std_mean, trapezoid, trapz,
    tril_indices, triu_indices, vander, var_mean, zeros_like,
)
from .frontend.tensor import cat as concatenate, vstack as row_stack  # noqa: E402
from .frontend.namespace import finfo, iinfo  # noqa: E402  (torch.finfo, torch.iinfo)
# nn.functional ops that torch also has at the top level with the same signature (torch.conv2d)
from .nn.functional import (  # noqa: E402
    adaptive_avg_pool1d, avg_pool1d, bilinear, celu, channel_shuffle,
    conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d,
    cosine_similarity, max_pool1d, max_pool2d, max_pool3d, pairwise_distance,
    pdist, pixel_shuffle, pixel_unshuffle, rms_norm, selu, threshold,
)
from . import optim  # noqa: E402
from .frontend.checkpoint import load, save  # noqa: E402
from . import amp  # noqa: E402
from . import linalg  # noqa: E402
from . import fft, signal  # noqa: E402  (Fourier transforms, windows, stft)
# torch's top-level spellings of linear algebra and signal functions (torch.det, torch.stft, ...)
from .linalg import cholesky, cholesky_inverse, det, logdet, renorm, slogdet  # noqa: E402
from .linalg import inv as inverse  # noqa: E402
from .linalg import (  # noqa: E402
    cholesky_solve, frobenius_norm, geqrf, lu_unpack, matrix_exp, matrix_power, nuclear_norm,
    orgqr, pinverse, triangular_solve,
)
# Where torch's older spelling differs from torch.linalg's (torch.qr's `some`, torch.svd's V).
from .linalg import torch_lu as lu, torch_lu_solve as lu_solve  # noqa: E402
from .linalg import torch_qr as qr, torch_svd as svd  # noqa: E402
from .signal import (  # noqa: E402
    bartlett_window, blackman_window, hamming_window, hann_window, istft, kaiser_window, stft,
)
from .frontend.sampling import (  # noqa: E402  (random tensors, drawn on the device)
    bernoulli, binomial, normal, poisson, rand, rand_like, randint, randint_like, randn,
    randn_like, randperm,
)
from .frontend.special import (  # noqa: E402  (the gamma family and Bessel's I0)
    digamma, i0, igamma, igammac, lgamma, mvlgamma, polygamma,
)
from . import special  # noqa: E402  (torch.special's names)
from . import distributions  # noqa: E402  (torch.distributions)
from .frontend.amp import autocast  # noqa: E402
from .frontend.dims import (  # noqa: E402  (torch's memory formats: accepted, change nothing)
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from .torch_devices import device  # noqa: E402  (torch.device's spelling of a device id)
from . import accelerator, backends, cuda  # noqa: E402  (torch.accelerator, .backends, .cuda)
from .frontend.jit import compile, jit  # noqa: E402,A004  (compile: torch.compile's name)
from .frontend.transforms import grad, value_and_grad  # noqa: E402
from . import autograd  # noqa: E402  (torch.autograd: grad, backward, Function, functional)
from .frontend.grad_mode import (  # noqa: E402  (torch's grad-mode switches)
    enable_grad, inference_mode, is_inference_mode_enabled, set_grad_enabled,
)
# torch's top-level spellings of nn.functional ops whose arguments differ from F's
# (torch.batch_norm, torch.embedding, torch.dropout(x, p, train), ...), and in-place forms
from .nn.aten import (  # noqa: E402
    alpha_dropout, alpha_dropout_, batch_norm, binary_cross_entropy_with_logits, celu_, dropout,
    dropout_, embedding, feature_alpha_dropout, feature_alpha_dropout_, group_norm,
    instance_norm, kl_div, layer_norm, rrelu, rrelu_, selu_, threshold_,
)
# torch.relu_(x), torch.zero_(x), ...: the in-place methods' function spellings
from .frontend.namespace import in_place_functions as _in_place_functions  # noqa: E402

_IN_PLACE_FUNCTIONS = _in_place_functions()
globals().update(_IN_PLACE_FUNCTIONS)
# torch's process-wide settings (set_default_dtype, set_num_threads, seed, ...)
from .settings import (  # noqa: E402
    are_deterministic_algorithms_enabled, get_default_device, get_float32_matmul_precision,
    get_num_threads, get_rng_state, initial_seed, is_deterministic_algorithms_warn_only_enabled,
    seed, set_default_device, set_default_dtype, set_float32_matmul_precision, set_num_threads,
    set_rng_state, use_deterministic_algorithms,
)
from .frontend.amp import get_autocast_dtype, is_autocast_enabled  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "tile",
    "Tensor", "tensor", "zeros", "ones", "full", "arange", "matmul", "einsum", "reshape",
    "permute_dims", "concat", "cat", "stack", "maximum", "minimum", "where", "no_grad",
    "gather", "take_along_dim", "index_select", "scatter", "scatter_add", "index_add", "sort",
    "argsort", "topk", "multinomial", "searchsorted", "bucketize", "bincount", "isin", "histc",
    "unravel_index", "nanquantile", "nanmedian", "histogram", "histogramdd", "index_reduce",
    "put", "frexp", "gradient", "renorm",
    "atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "corrcoef", "cross", "diag",
    "diagonal",
    "diff", "dstack", "flip", "fliplr", "flipud", "hstack", "inner", "kron", "linspace",
    "logspace", "meshgrid", "moveaxis", "movedim", "outer", "repeat_interleave", "roll", "rot90",
    "tensordot", "trace", "tril", "triu", "vstack",
    "device", "accelerator", "backends", "cuda", "jit", "compile", "optim", "grad",
    "value_and_grad", "autograd", "enable_grad", "inference_mode", "is_inference_mode_enabled",
    "set_grad_enabled", "AutogradError", "amp", "autocast", "channels_last", "channels_last_3d",
    "contiguous_format", "memory_format", "preserve_format", "save", "load", "linalg",
    "fft", "signal", "cholesky", "cholesky_inverse", "det", "logdet", "slogdet", "inverse",
    "cholesky_solve", "frobenius_norm", "geqrf", "lu", "lu_solve", "lu_unpack", "matrix_exp",
    "matrix_power", "nuclear_norm", "orgqr", "pinverse", "qr", "svd", "triangular_solve",
    "bartlett_window", "blackman_window", "hamming_window", "hann_window", "istft",
    "kaiser_window", "stft", "bernoulli", "binomial", "poisson", "normal", "rand", "rand_like",
    "randint", "randint_like", "randn", "randn_like", "randperm",
    "special", "distributions", "lgamma", "digamma", "polygamma", "mvlgamma", "igamma", "igammac", "i0",
    "tan", "sinh", "cosh", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "asinh", "acosh",
    "atanh", "arcsinh", "arccosh", "arctanh", "log1p", "expm1", "exp2", "log2", "log10", "atan2",
    "arctan2", "hypot", "logaddexp", "logaddexp2", "fmod", "remainder", "copysign", "trunc",
    "fix", "frac", "isnan", "isinf", "isfinite", "nan_to_num", "lerp", "addcmul", "addcdiv",
    "logsumexp", "count_nonzero", "nansum", "nanmean", "aminmax", "gcd", "lcm", "nextafter",
    *_METHOD_FUNCTIONS,
    "as_tensor", "asarray", "block_diag", "broadcast_shapes", "broadcast_tensors", "can_cast",
    "cartesian_prod", "cdist", "chain_matmul", "combinations", "cov", "cumulative_trapezoid",
    "diag_embed", "empty", "empty_like", "eye", "from_numpy", "full_like", "get_default_dtype",
    "is_grad_enabled", "is_tensor", "ones_like", "promote_types", "result_type",
    "scalar_tensor", "std_mean", "trapezoid", "trapz", "tril_indices", "triu_indices", "vander",
    "var_mean", "zeros_like", "concatenate", "row_stack", "fill", "rsub", "finfo", "iinfo",
    "Generator",
    "adaptive_avg_pool1d", "avg_pool1d", "bilinear", "celu",
    "channel_shuffle", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "cosine_similarity", "manual_seed", "max_pool1d", "max_pool2d",
    "max_pool3d", "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "rms_norm", "selu",
    "threshold",
    "alpha_dropout", "alpha_dropout_", "batch_norm", "binary_cross_entropy_with_logits",
    "celu_", "dropout", "dropout_", "embedding", "feature_alpha_dropout",
    "feature_alpha_dropout_", "group_norm", "instance_norm", "kl_div", "layer_norm", "rrelu",
    "rrelu_", "selu_", "threshold_", *_IN_PLACE_FUNCTIONS,
    "are_deterministic_algorithms_enabled", "get_default_device", "get_float32_matmul_precision",
    "get_num_threads", "get_rng_state", "initial_seed",
    "is_deterministic_algorithms_warn_only_enabled", "seed", "set_default_device",
    "set_default_dtype", "set_float32_matmul_precision", "set_num_threads", "set_rng_state",
    "use_deterministic_algorithms", "get_autocast_dtype", "is_autocast_enabled",
    "GinghamError",
    "TileError",
    "TileSyntaxError",
    "TileNameError",
    "TileIndexError",
    "TileAffineError",
    "TileShapeError",
    "TileTypeError",
    "TileConflictError",
    "DeviceError",
    "DeviceNotFoundError",
    "DeviceMemoryError",
    "KernelCompileError",
    "StateDictError",
    "CheckpointError",
    "OnnxError",
    "UnsupportedOpError",
]

# torch's dtype names: ``gingham.zeros(3, dtype=gingham.float16)``, ``x.to(gingham.long)``.
# They are NumPy dtypes, which every gingham function takes (as do names: "float16").
# Defined last: ``float``, ``int`` and ``bool`` shadow the builtins in this module's namespace,
# as in torch's. ``bfloat16`` (ml_dtypes') is made on first use (see :func:`__getattr__`).
from .tile.dtypes import DTYPES as _DTYPES  # noqa: E402

float16 = half = _DTYPES["float16"]
float32 = float = _DTYPES["float32"]  # noqa: A001
float64 = double = _DTYPES["float64"]
int8, uint8, uint16, uint32, uint64 = (_DTYPES[n] for n in ("int8", "uint8", "uint16",
                                                              "uint32", "uint64"))
int16 = short = _DTYPES["int16"]
int32 = int = _DTYPES["int32"]  # noqa: A001
int64 = long = _DTYPES["int64"]
bool = _DTYPES["bool"]  # noqa: A001
DTYPE_NAMES = ("float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8",
               "uint8", "int16", "short", "uint16", "int32", "int", "uint32", "int64", "long",
               "uint64", "bool")
__all__ += list(DTYPE_NAMES)


def __getattr__(name: str):
    """``gingham.bfloat16``: imported from ml_dtypes when first asked for (0.5 s)."""
    if name == "bfloat16":
        return _DTYPES["bfloat16"]
    raise AttributeError(f"module 'gingham' has no attribute {name!r}")
