"""``gingham.keras``: gingham as a Keras 3 backend.

    import gingham.keras            # before keras
    import keras

    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(optimizer="adam", metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=64, epochs=3, validation_data=(x_val, y_val))

``keras.config.backend()`` is then ``"gingham"``; ``KERAS_BACKEND=gingham`` works as well (it
is what importing this module sets up; another backend named there is refused). Variables are
gingham tensors on gingham's default device (``GINGHAM_DEVICE`` or the config file; ``with
keras.device("opencl:0"):`` picks another for what is created inside). Each training, test
and predict step (forward, gradients from gingham's autodiff, the optimiser's updates, the
metrics' updates) is traced once per batch shape by :func:`gingham.jit` and replayed as one
compiled program.

What works: ``keras.ops`` on gingham tensors (elementwise math, reductions, shapes, matmul, dot,
einsum, repeat, cumsum / cumprod, image.resize (bilinear; nearest by whole factors), softmax over
one or several axes, scatter, scatter_update, segment_sum / max / min / prod, slice_update, sort,
argsort, top_k, in_top_k, take_along_axis, median / quantile, dot_product_attention, the
convolutions and poolings below), ``convert_to_tensor`` / ``convert_to_numpy``, dtypes float32,
float16, bfloat16 and the integers (and the ``mixed_float16`` / ``mixed_bfloat16`` policies); the
layers Dense, EinsumDense, Conv1D / Conv2D / Conv3D (channels_last and channels_first,
``groups=``), DepthwiseConv2D, SeparableConv2D, Conv1DTranspose / Conv2DTranspose /
Conv3DTranspose, max and average pooling in 1-, 2- and 3-d and the global poolings,
BatchNormalization, LayerNormalization, Dropout (also with a ``noise_shape``), Rescaling,
Normalization, ZeroPadding2D, Flatten, Reshape, Permute, Embedding (``mask_zero`` too),
MultiHeadAttention (``use_causal_mask``, attention masks, grouped-query heads), LSTM, GRU,
SimpleRNN and Bidirectional (masked; Keras' generic recurrent loop, unrolled into the step's
program: for short sequences), UpSampling1D / UpSampling2D (nearest and bilinear), Resizing,
RepeatVector, Activation (relu, relu6, gelu, sigmoid, tanh, softmax, log_softmax, silu / swish,
hard_sigmoid, hard_silu / hard_swish, selu, celu, glu, and the shrinks), Add, Multiply,
Concatenate; Sequential and functional models; ``keras.applications`` built with ``weights=None``
(tested against Keras' PyTorch backend: one training step of MobileNetV2; seen to build and train a
step on ``cpu``: MobileNet, MobileNetV2, MobileNetV3Small, EfficientNetB0, Xception, ResNet50,
VGG16, DenseNet121); the losses (Sparse)CategoricalCrossentropy, BinaryCrossentropy,
MeanSquaredError; the metrics accuracy, sparse_categorical_accuracy, mae; Keras' optimisers
(tested: SGD with momentum and nesterov, Adam, AdamW; gradient clipping and accumulation); ``fit``
(validation data, callbacks, history), ``evaluate``, ``predict``, ``train_on_batch`` /
``test_on_batch`` / ``predict_on_batch``, ``model.save`` / ``keras.models.load_model`` and
``get_weights`` / ``set_weights``.

Semantics to know: the steps are always compiled (``run_eagerly`` and ``jit_compile`` are
ignored); ``ops.cond`` on a tensor inside a step runs both branches and selects on the
device. Outside a step, ``variable.value`` is a snapshot of the variable's current value (a
plain tensor, not the leaf gradients are taken for), so eager code can compute from a
variable and then assign it; gradients are taken inside the trainer's steps. Ops whose
result's shape depends on the values (``where`` with one argument, ``nonzero``) and
``linalg.qr`` (the Orthogonal initializer's), ``unique`` and ``view`` run on the host outside
a step and raise inside one (so RandAugment, which calls ``nonzero``, trains only outside
``fit``); so does a tensor used as a Python index (RandomCrop's offsets), which would be
frozen into the step. ``keras.random`` draws on the device inside a step, anew at every
replay (GaussianNoise, the augmentation layers, a VAE's sampling); ``ops.custom_gradient``
works inside and outside one. ``scan``, ``map``, ``fori_loop`` and ``while_loop`` unroll into the
step; ``while_loop`` on a device condition needs ``maximum_iterations`` there. ``cumsum`` / ``cumprod`` cost ``N^2`` along their axis. In
``dot_product_attention`` a query whose keys are all masked gets zeros (PyTorch's
attention), not the mean of the values.

Not yet: sparse and ragged tensors, ``steps_per_execution > 1``, the fused ``lstm`` /
``gru`` backend ops (Keras falls back to its recurrent loop), ``linalg.eig`` (complex
eigenvalues; the other ``linalg`` ops run on :mod:`gingham.linalg`), and export. Each such op
raises ``NotImplementedError`` naming the op and "gingham's Keras backend".

How it is installed: Keras 3 has no plug-in mechanism for backends (``keras.src.backend``,
``keras.src.layers.layer`` and ``keras.src.models.model`` pick the backend's modules by name
when they are imported). Importing this module puts a finder at the front of
``sys.meta_path`` that answers for ``keras.src.backend.numpy`` and its submodules with
gingham's modules (:mod:`gingham.keras.backend`), imports Keras with ``KERAS_BACKEND=numpy``
for that import only, then names the backend ``"gingham"``. Keras' only run-time tests of
the name ``"numpy"`` choose an error message's wording and a reload path
(``keras.config.set_backend``), so the rename changes nothing else; the one place that
dispatches on the name, ``DynamicBackend`` (the preprocessing layers' ``self.backend``), is
taught ``"gingham"``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys

from ..errors import GinghamError

BACKEND_NAME = "gingham"
# Keras' own slot that gingham's modules fill: the numpy backend is the one whose trainer
# and layer mixin need nothing of a framework (TensorFlow, JAX, PyTorch).
_SLOT = "keras.src.backend.numpy"
_SOURCE = "gingham.keras.backend"


class _AliasLoader(importlib.abc.Loader):
    """Gives the import system gingham's module itself for Keras' name (one module object
    under two names, so its classes are the same for ``isinstance``)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.source)
        self._spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # The import system set __spec__ to Keras' name: keep the module's own.
        module.__spec__ = self._spec


class _BackendFinder(importlib.abc.MetaPathFinder):
    """Answers for ``keras.src.backend.numpy[.*]`` with ``gingham.keras.backend[.*]``."""

    def find_spec(self, name, path, target=None):
        if name != _SLOT and not name.startswith(_SLOT + "."):
            return None
        source = _SOURCE + name[len(_SLOT):]
        return importlib.util.spec_from_loader(name, _AliasLoader(source),
                                               is_package=name == _SLOT)


def _install() -> None:
    config = sys.modules.get("keras.src.backend.config")
    if config is not None:
        if config.backend() != BACKEND_NAME:
            raise GinghamError(
                f"keras was imported with its {config.backend()!r} backend before "
                "gingham.keras; import gingham.keras first (before keras and anything that "
                "imports keras), in a fresh process")
        return
    wanted = os.environ.get("KERAS_BACKEND", "")
    if wanted not in ("", BACKEND_NAME):
        raise GinghamError(
            f"KERAS_BACKEND={wanted!r} asks for another backend than gingham; unset it or set "
            f"KERAS_BACKEND={BACKEND_NAME} to use gingham.keras")
    if not any(isinstance(finder, _BackendFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BackendFinder())
    os.environ["KERAS_BACKEND"] = "numpy"
    try:
        importlib.import_module("keras")  # the import that loads gingham's backend modules
        from keras.src.backend import config as keras_config
    finally:
        if wanted:
            os.environ["KERAS_BACKEND"] = wanted
        else:
            del os.environ["KERAS_BACKEND"]
    keras_config._BACKEND = BACKEND_NAME
    _serve_dynamic_backend()


def _serve_dynamic_backend() -> None:
    """Keras' preprocessing layers (Rescaling, Normalization, ...) reach the backend through
    ``DynamicBackend``, which knows the built-in backends' names only (for any other it
    answers None): for ``"gingham"`` it answers with the backend Keras loaded."""
    from keras.src import backend as keras_backend
    from keras.src.utils import backend_utils

    dynamic = backend_utils.DynamicBackend
    if getattr(dynamic, "_gingham_served", False):
        return
    builtin = dynamic.__getattr__

    def __getattr__(self, name):
        if self._backend == BACKEND_NAME:
            return getattr(keras_backend, name)
        return builtin(self, name)

    dynamic.__getattr__ = __getattr__
    dynamic._gingham_served = True


_install()

from .backend.core import current_device, set_device  # noqa: E402

__all__ = ["BACKEND_NAME", "current_device", "set_device"]
