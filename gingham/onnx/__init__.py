"""``gingham.onnx``: run ONNX models (exported from PyTorch, TensorFlow, ...) through gingham.

    import gingham.onnx
    model = gingham.onnx.load("resnet18.onnx", device="cpu")     # or an onnx.ModelProto
    (logits,) = model(images)                                    # NumPy arrays or Tensors in,
                                                                 # gingham Tensors out
    outputs = model.run(None, {"input": images})                 # onnxruntime's spelling

Loading checks the model and names every op type gingham does not convert at once
(:class:`gingham.UnsupportedOpError`). Each input signature (shapes, dtypes; symbolic dims
such as a dynamic batch take the size of the array passed) is traced once with
:func:`gingham.jit` and replayed compiled. Shape arithmetic (``Shape``, ``Gather``, ``Concat``,
``Range``, ``ConstantOfShape``, ... on constants and static shapes) is folded on the host, so
every shape stays static. Recurrent nodes (``LSTM``, ``GRU``, ``RNN``) unroll over their
static sequence length (:mod:`gingham.onnx.ops_rnn`); ``If`` converts the branch its condition
picks when the condition is known at trace time (a constant, a graph input passed by value, a
value of the shapes), and both branches, selecting their outputs, when it is computed on the
device (an exported ``torch.cond``); ``Loop`` unrolls when its trip count and conditions are known so, ``Scan``
over its scanned axis. Sequences are Python lists of tensors while the graph is traced
(:mod:`gingham.onnx.ops_sequence`; a sequence input is passed as a list of arrays), optionals
a value or None. Attention (opsets 23-25), RotaryEmbedding and SwiGLU build on
``F.scaled_dot_product_attention``'s pieces (:mod:`gingham.onnx.ops_attention`; opset 27's
LinearAttention unrolls its recurrence over the positions, CausalConvWithState is a depthwise
convolution after its state); the
quantized ops compute exactly in int32 (:mod:`gingham.onnx.ops_quant`); the random ops draw
from Philox on the device (:mod:`gingham.onnx.ops_random`), as does training-mode
``Dropout``; training-mode ``BatchNormalization`` gives the updated running statistics.
``Resize`` (opsets 10-19) and ``Upsample`` take every mode (nearest, linear, cubic), coordinate
transformation, ``nearest_mode``, ``antialias``, ``axes`` and ``keep_aspect_ratio_policy``:
each resized axis is a contraction with a weight matrix made on the host
(:mod:`gingham.onnx.ops_resize`). On CPUs the image ops run
channels-last (``layout="auto"``, see :mod:`gingham.onnx.layout`). Ops whose result's shape
depends on values (``NonZero``, ``Unique``, ``NonMaxSuppression``) run as onnxruntime runs
them: the graph is compiled in segments, cut at each such op, whose inputs are read back
(a synchronisation and a copy) and which runs on the host with NumPy
(:mod:`gingham.onnx.ops_value_shaped`); the segment after it is traced once per distinct
shape of its results (a detector's number of detections) and replayed for a repeat.
:mod:`gingham.onnx.backend` is ONNX's ``Backend`` interface.

Supported ops (default domain; :func:`supported_ops` lists them) — {ops}.

Model-local functions (``export_modules_as_functions``) are inlined when the model loads.

Not supported: other domains, ``Loop`` on conditions computed on the device, ``If`` on one
whose branches give outputs of different shapes or dtypes, Pad's
``reflect``/``edge``/``wrap`` modes on other than the last 1-3 axes of a 2-5-d input,
BatchNormalization's statistics outputs before opset 14, pooling's ``Indices`` output, the 2-, 4- and 8-bit float and integer quantized types, 3-d Col2Im, GridSample of
more than 3 spatial axes, RoiAlign's adaptive ``sampling_ratio=0``, value-shaped ops inside an ``If`` branch
or a ``Loop``/``Scan`` body on values computed on the device, ``BitCast`` (Tile has no bit
cast), string ops, TfIdfVectorizer and ImageDecoder. Needs the ``onnx`` package (``pip install 'gingham[onnx]'``); gingham's core does
not.
"""

from ..errors import OnnxError, UnsupportedOpError
from .model import OnnxModel, load
from .ops import supported_ops

__doc__ = __doc__.replace("{ops}", ", ".join(supported_ops()))

__all__ = ["load", "OnnxModel", "supported_ops", "OnnxError", "UnsupportedOpError"]
