"""gingham: a portable deep-learning compiler.

Programs are written in Tile (``gingham.tile``); kernels are generated for the CPU (C), any
OpenCL device and CUDA.
"""

from . import tile
from .errors import (
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
    index_add,
    index_select,
    isin,
    nanmedian,
    nanquantile,
    scatter,
    scatter_add,
    searchsorted,
    sort,
    take_along_dim,
    topk,
    unravel_index,
)
from .nn.functional import multinomial  # noqa: E402
from .frontend import optim  # noqa: E402
from .frontend.checkpoint import load, save  # noqa: E402
from . import amp  # noqa: E402
from . import linalg  # noqa: E402
from . import fft, signal  # noqa: E402  (Fourier transforms, windows, stft)
from .frontend.amp import autocast  # noqa: E402
from .frontend.jit import jit  # noqa: E402
from .frontend.transforms import grad, value_and_grad  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "tile",
    "Tensor", "tensor", "zeros", "ones", "full", "arange", "matmul", "einsum", "reshape",
    "permute_dims", "concat", "cat", "stack", "maximum", "minimum", "where", "no_grad",
    "gather", "take_along_dim", "index_select", "scatter", "scatter_add", "index_add", "sort",
    "argsort", "topk", "multinomial", "searchsorted", "bucketize", "bincount", "isin", "histc",
    "unravel_index", "nanquantile", "nanmedian",
    "atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "corrcoef", "cross", "diag",
    "diagonal",
    "diff", "dstack", "flip", "fliplr", "flipud", "hstack", "inner", "kron", "linspace",
    "logspace", "meshgrid", "moveaxis", "movedim", "outer", "repeat_interleave", "roll", "rot90",
    "tensordot", "trace", "tril", "triu", "vstack",
    "jit", "optim", "grad", "value_and_grad", "amp", "autocast", "save", "load", "linalg",
    "fft", "signal",
    "tan", "sinh", "cosh", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "asinh", "acosh",
    "atanh", "arcsinh", "arccosh", "arctanh", "log1p", "expm1", "exp2", "log2", "log10", "atan2",
    "arctan2", "hypot", "logaddexp", "logaddexp2", "fmod", "remainder", "copysign", "trunc",
    "fix", "frac", "isnan", "isinf", "isfinite", "nan_to_num", "lerp", "addcmul", "addcdiv",
    "logsumexp", "count_nonzero", "nansum", "nanmean", "aminmax", "gcd", "lcm", "nextafter",
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
