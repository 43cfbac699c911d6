"""``torch.backends``' flags that PyTorch scripts set, accepted so that those lines run.

gingham's kernels are its own: ``cudnn.benchmark`` has an equivalent in ``gingham tune``
(measured schedules, kept on disk), TF32 is off (float32 contractions are IEEE float32), and
results are deterministic run to run. Setting these flags changes nothing.

    gingham.backends.cudnn.benchmark = True      # accepted; see `gingham tune`
"""

from __future__ import annotations

from types import SimpleNamespace

cudnn = SimpleNamespace(benchmark=False, deterministic=True, enabled=True, allow_tf32=False,
                        is_available=lambda: False)
cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False,
                                              allow_fp16_reduced_precision_reduction=False,
                                              allow_bf16_reduced_precision_reduction=False),
                       is_built=lambda: True)
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
