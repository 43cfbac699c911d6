"""gingham's benchmark suite: ``gingham bench ops`` (more benches later).

Every benchmark runs gingham beside PyTorch (and NumPy) on the same device in the same run,
checks gingham's output against the baseline's before timing it (a fast wrong kernel is
reported as wrong, never as a time), and reports a table and, with ``--json``, one record per
(op, baseline). Layout: :mod:`.ops` (what is measured and checked), :mod:`.baselines` (PyTorch,
NumPy, host references), :mod:`.timing` (medians under a time budget), :mod:`.report` (table,
JSON), :mod:`.cli` (the subcommand).

    >>> from gingham.bench import OpBench, Settings
    >>> from gingham.devices import get_device
    >>> bench = OpBench(Settings("cpu", quick=True, only=("gemm",)), get_device("cpu"))
    >>> [r.status for r in bench.run()]
    ['ok']
"""

from .ops import GROUPS, OpBench, OpResult, Settings, run_ops

__all__ = ["GROUPS", "OpBench", "OpResult", "Settings", "run_ops"]
