"""gingham's benchmark suite: ``gingham bench ops``, ``model``, ``onnx`` and ``all``.

Every benchmark runs gingham beside PyTorch (eager and ``torch.compile``; NumPy for fp32 GEMM on
a CPU) on the same device in the same run, checks gingham's output against the baseline's
before timing it (a fast wrong kernel is reported as wrong, never as a time), and reports a
table and, with ``--json``, one record per (op, baseline) or per training run. Layout:
:mod:`.ops` (what is measured and checked), :mod:`.model` (training steps, seconds per epoch,
``--all-devices``, the chart), :mod:`.onnx` (inference through :mod:`gingham.onnx` beside
onnxruntime and PyTorch), :mod:`.baselines` (PyTorch, NumPy, host references),
:mod:`.timing` (medians under a time budget), :mod:`.report` (table, JSON), :mod:`.cli` (the
subcommands).

    >>> from gingham.bench import OpBench, Settings
    >>> from gingham.devices import get_device
    >>> bench = OpBench(Settings("cpu", quick=True, only=("gemm",)), get_device("cpu"))
    >>> [r.status for r in bench.run()]
    ['ok']
"""

from .model import MODELS, ModelSettings, Run, bench_models
from .ops import GROUPS, OpBench, OpResult, Settings, run_ops

__all__ = ["GROUPS", "OpBench", "OpResult", "Settings", "run_ops", "MODELS", "ModelSettings",
           "Run", "bench_models"]
