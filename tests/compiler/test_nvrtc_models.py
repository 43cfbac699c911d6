"""Every CUDA kernel of the benchmark models' training steps builds under NVRTC, for an H200.

A GPU-less machine (CI) cannot run the CUDA backend, but NVRTC needs no GPU: the steps that
``gingham bench model`` trains are traced here, lowered for an H200's description exactly as
:func:`gingham.compiler.compile_program` lowers them on the GPU, rendered as the CUDA device
renders them (several kernels a translation unit) and built for sm_90a. Each must compile,
the tensor-core kernels must spill nothing, and ptxas must keep their warpgroup products
asynchronous (no C7515: it serialises every wgmma of a kernel when it cannot).
"""

from __future__ import annotations

import pytest

import gingham
from gingham.bench import model as bench_model
from gingham.compiler import kernel_ir  # noqa: F401  (before codegen: they import each other)
from gingham.codegen.c_family import DIALECTS, assemble
from gingham.compiler import lower_program, rewrite_program
from gingham.compiler.dedupe import unit_of

from gingham.tune.described import H200
from nvrtc_check import build_for_h200, nvrtc, spilled_bytes

#: Kernels a translation unit (the CUDA device builds pieces of a few kernels too).
PIECE = 8
TC = "gpu tensor-core contraction"


def _step_program(model: str, precision: str, layout: str):
    """The bound Tile program of one training step of ``model`` as ``gingham bench model``
    builds it (SGD with Nesterov momentum, autocast in ``precision``), traced, not run."""
    spec = bench_model.MODELS[model]
    step = spec.gingham_step("cpu", layout, precision)
    x, y = bench_model.synthetic_batches(spec, spec.batch, layout)[0]
    return bench_model.trace_step(step, gingham.tensor(x, device="cpu"),
                                  gingham.tensor(y, device="cpu"))


def _distinct_h200_kernels(bound) -> dict[str, tuple]:
    """{entry: (rendering, schedule)} of the distinct kernels an H200 compiles."""
    distinct: dict[str, tuple] = {}
    for lowered in lower_program(rewrite_program(bound), H200):
        unit, rendered = unit_of(lowered, DIALECTS["cuda"])
        distinct.setdefault(unit.entry, (rendered, lowered.schedule))
    return distinct


@pytest.mark.parametrize("model,precision,layout", [
    ("resnet9", "bf16", "NHWC"),  # the tensor-core kernels: wgmma, split-K, im2col staging
    ("resnet9", "fp32", "NCHW"),  # the tiled fp32 schedules of every size
    ("story", "fp32", "NCHW"),  # 100x100 images, odd sizes, the strided gradients' phases
])
def test_every_kernel_of_a_training_step_builds(model, precision, layout):
    nvrtc()  # skip early, before tracing, where NVRTC is missing
    distinct = _distinct_h200_kernels(_step_program(model, precision, layout))
    entries = sorted(distinct)
    logs: dict[str, str] = {}
    for start in range(0, len(entries), PIECE):
        piece = entries[start:start + PIECE]
        source = assemble([distinct[e][0] for e in piece], DIALECTS["cuda"])
        logs.update(build_for_h200(source, f"{model}_{precision}_{start}"))
    assert sorted(logs) == entries, "ptxas did not report every kernel"
    tensor_core = [e for e in entries if distinct[e][1].startswith(TC)]
    assert bool(tensor_core) == (precision != "fp32"), [distinct[e][1] for e in entries]
    for entry in tensor_core:
        schedule, lines = distinct[entry][1], logs[entry]
        assert spilled_bytes(lines) == 0, (schedule, lines)
        assert "C7515" not in lines and "serialized" not in lines, (schedule, lines)
