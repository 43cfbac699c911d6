"""Measured algorithm choice: which of an operation's Tile formulations runs faster here.

A float32 3x3 convolution can be built two ways (:mod:`gingham.nn.winograd`): one contraction
(``direct``) or Winograd's four (``winograd``: 2.25x fewer multiply-adds in the products, about
4x the memory traffic in the transforms). Which is faster depends on the device, the layout,
the channels and the image size more than a rule can say: on the H200 Winograd won from 64
channels up, on a 2-core CPU only from 128, and for devices nobody has measured the rule only
guesses. So under ``conv_algorithm = "auto"`` each layer's algorithm is

1. the tuning database's (:mod:`gingham.tune.db`), when ``gingham tune`` (or ``GINGHAM_TUNE=on``)
   measured this layer on this device;
2. else, inside a tuning session, measured now (:func:`measure`): the layer alone — forward,
   and in training the gradients of its input and weights — on random data of its shapes,
   compiled each way with the cost model's schedules (only the winner's kernels are then
   searched, as part of the model's program), each way's results checked against the direct
   one's, the ways timed interleaved; the faster is stored;
3. else the rule: a channel threshold per device kind
   (:data:`gingham.nn.winograd.AUTO_MIN_CHANNELS`). With ``GINGHAM_TUNE=background`` the
   layer is also queued for the background tuner (:mod:`gingham.tune.background`): its
   worker compiles both ways (:func:`prepare`), the training thread measures them between
   two steps, and a jitted step that the winner would change is traced again.

The database key is the layer's shapes, dtype, layout and whether it trains, so every
model with the same layer shares one measurement; the device key is the tuner's.

    >>> layer = ConvLayer("cuda:0", "float32", batch=512, height=32, width=32,
    ...                   in_channels=64, out_channels=128, channels_last=True)
    >>> choose(layer, rule="winograd")      # outside `gingham tune`, without an entry
    Choice(algorithm='winograd', source='rule')
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from ..cache import cache_key
from ..config import debug_print, get_config
from ..errors import GinghamError
from .db import TuningDB
from .keys import device_key
from .search import (TOLERANCE, SearchResult, _active_session, _calibrate, _relative_error,
                     _time_interleaved, stats, tuning)

#: The tuning database's family of these entries (``config``: ``{"algorithm": ...}``).
FAMILY = "conv-algorithm"
#: The ways a 3x3 convolution can be built; the first is the reference of the checks.
ALGORITHMS = ("direct", "winograd")


@dataclass(frozen=True)
class ConvLayer:
    """One 3x3, stride-1, padding-1 convolution as the choice sees it: what decides which
    algorithm is faster, and nothing else (not the values, not the model around it)."""

    device: str
    dtype: str
    batch: int
    height: int
    width: int
    in_channels: int
    out_channels: int
    channels_last: bool = True
    training: bool = True

    def describe(self) -> str:
        """``conv3x3 N512 32x32 64->128 NHWC float32 training`` (the tuner's report)."""
        mode = "training" if self.training else "inference"
        return (f"conv3x3 N{self.batch} {self.height}x{self.width} {self.in_channels}->"
                f"{self.out_channels} {self.data_format()} {self.dtype} {mode}")

    def key(self) -> str:
        """The database's kernel key: every field but the device (the device key's part)."""
        fields = asdict(self)
        del fields["device"]
        return cache_key("algorithm", FAMILY, tuple(sorted(fields.items())))

    def data_format(self) -> str:
        return "NHWC" if self.channels_last else "NCHW"

    def weight_shape(self) -> tuple[int, ...]:
        return (self.out_channels, self.in_channels, 3, 3)

    def input_shape(self) -> tuple[int, ...]:
        if self.channels_last:
            return (self.batch, self.height, self.width, self.in_channels)
        return (self.batch, self.in_channels, self.height, self.width)


@dataclass(frozen=True)
class Choice:
    """The algorithm for a layer and where the decision came from: ``tuned`` (the database),
    ``measured`` (just now, and stored), ``rule`` (no measurement for this device) or
    ``config`` (``conv_algorithm`` named the algorithm)."""

    algorithm: str
    source: str


def choose(layer: ConvLayer, rule: str) -> Choice:
    """The algorithm to build ``layer`` with under ``auto``: see the module docstring.
    ``rule`` is the untuned choice (``direct`` or ``winograd``)."""
    from ..devices import get_device

    device = get_device(layer.device)
    dkey = device_key(device.info)
    db = TuningDB()
    entry = db.get(layer.key(), dkey)
    if entry is not None:
        algorithm = entry["config"].get("algorithm")
        if entry.get("family") == FAMILY and algorithm in ALGORITHMS:
            stats.hits += 1
            return Choice(algorithm, "tuned")
        debug_print(1, f"tuning: ignoring the stored algorithm of {layer.describe()}: "
                       f"{algorithm!r}")
    stats.misses += 1
    session = _active_session()
    if session is None and get_config().tune == "background":
        from .background import refiner
        from .device_model import device_model

        device_model(device)  # here, not on the worker: it must not measure while steps run
        refiner().submit_layer(layer, rule, device, (layer.key(), dkey))
    if session is None or not session.algorithms:
        return Choice(rule, "rule")
    try:
        result = measure(layer, rule, session.progress)
    except GinghamError as exc:  # neither way built or ran here (out of memory, say)
        print(f"tune: {exc}; {layer.describe()} follows the rule ({rule}), not stored",
              file=sys.stderr, flush=True)
        return Choice(rule, "rule")
    session.results.append(result)
    db.put(layer.key(), dkey, result.entry())
    return Choice(result.config, "measured")


def measure(layer: ConvLayer, rule: str, progress: bool = True) -> SearchResult:
    """Build, check and time ``layer`` each way on its device; the faster way wins. A way
    whose results differ from the direct one's by more than the dtype's tolerance (or that
    fails to build or run) is dropped and reported, never chosen."""
    from ..devices import get_device

    stats.searches += 1
    device = get_device(layer.device)
    started = time.perf_counter()
    runs: dict[str, tuple[Callable[[], None], int]] = {}
    reference: list[np.ndarray] | None = None
    rejected: list[str] = []
    for algorithm in ALGORITHMS:
        try:
            run, outputs = _layer_program(layer, algorithm, device)
        except GinghamError as exc:
            rejected.append(f"{algorithm}: {exc}")
            continue
        if reference is None:
            reference = outputs
        else:
            error = _relative_error(outputs, reference)
            if not error <= TOLERANCE[layer.dtype]:
                rejected.append(f"{algorithm}: relative error {error:.2e} against "
                                f"{ALGORITHMS[0]}")
                continue
        runs[algorithm] = (run, _calibrate(device, run))
    stats.rejected += len(rejected)
    if not runs:
        raise GinghamError(f"{layer.describe()}: no algorithm could be built on {device.id}: "
                           + "; ".join(rejected))
    seconds = _time_interleaved(device, runs, deadline=None)
    stats.timed += len(seconds)
    winner = min(seconds, key=seconds.__getitem__)
    if progress:
        figures = ", ".join(f"{a} {s * 1e3:.3f} ms" for a, s in seconds.items())
        print(f"tune {layer.describe()}: {figures} -> {winner}", file=sys.stderr, flush=True)
    return SearchResult(name=layer.describe(), family=FAMILY, schedule=winner, config=winner,
                        seconds=seconds[winner], default=rule,
                        default_seconds=seconds.get(rule, seconds[winner]), tried=len(ALGORITHMS),
                        rejected=rejected, elapsed=time.perf_counter() - started)


def prepare(layer: ConvLayer) -> None:
    """Compile ``layer``'s program each way for its device, touching no device memory (its
    inputs are placeholders): the background tuner's worker does this, so that
    :func:`measure`, run between two training steps, finds every kernel in the cache.
    Raises :class:`~gingham.errors.GinghamError` where a way does not build."""
    from ..devices import get_device
    from ..frontend.tensor import Tensor

    def placeholder(*shape: int) -> Tensor:
        value = Tensor(shape, np.dtype(layer.dtype), layer.device,
                       requires_grad=layer.training)
        value._placeholder = True  # never realized: it has no value, only a shape
        return value

    device = get_device(layer.device)
    for algorithm in ALGORITHMS:
        x, weight = placeholder(*layer.input_shape()), placeholder(*layer.weight_shape())
        _compile(_layer_targets(layer, algorithm, x, weight), device)


def _layer_targets(layer: ConvLayer, algorithm: str, x, weight) -> list:
    """What the layer's program computes from ``x`` and ``weight`` built by ``algorithm``:
    its output, or in training the gradients of its input and weights. Outside any autocast
    block, beside whatever step is being traced (its tensors are its own)."""
    from ..frontend.amp import autocast
    from ..nn import functional as F

    with autocast(enabled=False):
        y = F._conv("conv2d", 2, x, weight, None, 1, 1, 1, 1, layer.data_format(),
                    algorithm=algorithm)
        if not layer.training:
            return [y]
        # The mean of the square: a loss whose gradient is the output itself, so both
        # gradients depend on every output value.
        (y * y).mean().backward()
        return [x.grad, weight.grad]


def _compile(targets: list, device) -> tuple[list, object]:
    """The leaves of ``targets``' graph and its executable on ``device``."""
    from ..compiler import compile_program
    from ..frontend.tensor import _bound_graph, is_graph_input

    leaves, _, bound = _bound_graph(targets, is_graph_input)
    # With the cost model's schedules: searching both ways' kernels would double what a
    # model's tuning costs (NVRTC builds each candidate), and the winner's are searched anyway
    # when the model's own program compiles.
    with tuning(kernels=False, algorithms=False):
        return leaves, compile_program(bound, device)


def _layer_program(layer: ConvLayer, algorithm: str, device) -> tuple[Callable[[], None],
                                                                      list[np.ndarray]]:
    """The layer's program built by ``algorithm``, compiled for ``device`` and run once on
    random data: a function that runs it once more, and that first run's outputs."""
    from ..frontend.tensor import tensor

    rng = np.random.default_rng(0)

    def normal(*shape: int, scale: float = 1.0):
        values = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
        values = values.astype(layer.dtype, copy=False)
        return tensor(values, device=layer.device, requires_grad=layer.training)

    x = normal(*layer.input_shape())
    weight = normal(*layer.weight_shape(), scale=(2.0 / (9 * layer.in_channels)) ** 0.5)
    targets = _layer_targets(layer, algorithm, x, weight)
    leaves, exe = _compile(targets, device)
    inputs = [leaf._buffer for leaf in leaves]
    buffers = exe.run(inputs)
    outputs = []
    for target, buffer in zip(targets, buffers):
        array = np.empty(target.shape, target.dtype)
        device.copy_out(buffer, array)
        outputs.append(array)
    return (lambda: exe.run(inputs)), outputs


__all__ = ["ConvLayer", "Choice", "choose", "measure", "prepare", "FAMILY", "ALGORITHMS"]
