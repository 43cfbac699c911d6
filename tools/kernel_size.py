"""Size of the CUDA kernels of gingham's special functions for an H200 (sm_90): source lines,
registers, stack frame and spilled bytes per kernel, from NVRTC's ptxas log. No GPU needed,
only NVRTC (``cuda-bindings`` importable).

    PYTHONPATH=$PWD python3 tools/kernel_size.py [igamma kl_test ...] [--dtype float64]
        [--largest 3] [--out DIR] [--nvrtc "--gpu-architecture=sm_90a -minimal ..."]

Each case builds its outputs on lazy ``cpu`` tensors as the tests do (tests/frontend/
test_special.py, test_distributions.py), then lowers two programs as an H200 does
(``gingham.tune.described.H200``): the forward outputs from the leaves, and the gradients
from the leaves and the forward outputs (what ``realize`` of the gradients compiles after
the forward was realized). A kernel with a stack frame or spills needs local memory per
thread at launch: an H100 refused such igamma kernels with CUDA_ERROR_OUT_OF_MEMORY.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Callable

os.environ.setdefault("GINGHAM_TUNE_MEASURE", "0")

import numpy as np  # noqa: E402

import gingham  # noqa: E402
from gingham import distributions as D  # noqa: E402
from gingham import special  # noqa: E402
from gingham.compiler.dedupe import unit_of  # noqa: E402  (before codegen: they import each other)
from gingham.codegen.c_family import DIALECTS  # noqa: E402
from gingham.compiler import lower_program, rewrite_program  # noqa: E402
from gingham.frontend.tensor import Tensor, _bound_graph, graph_inputs  # noqa: E402
from gingham.tune.described import H200  # noqa: E402
from nvrtc_kernels import nvrtc_build  # noqa: E402  (tools/ is the script's directory)

_GRID = np.geomspace(0.05, 60.0, 16)


def _leaf(values, dtype) -> Tensor:
    return gingham.tensor(np.asarray(values, dtype), device="cpu").requires_grad_()


def _unary(function: Callable) -> Callable:
    def build(dtype):
        x = _leaf(np.linspace(-9.75, 40.0, 64), dtype)
        return [function(x)]
    return build


def _igamma(dtype):
    a, x = _leaf(_GRID, dtype), _leaf(_GRID[::-1], dtype)
    return [gingham.igamma(a, x), gingham.igammac(a, x)]


def _kl(dtype):
    p = [_leaf([0.4, 1.7, 6.0], dtype), _leaf([1.5, 0.7, 3.0], dtype)]
    q = [_leaf([0.5, 2.0, 4.0], dtype), _leaf([0.3, 1.1, 2.0], dtype)]
    return [D.kl_divergence(D.Gamma(*p), D.Gamma(*q)),
            D.kl_divergence(D.Beta(*p), D.Beta(*q)),
            D.kl_divergence(D.Dirichlet(p[0].unsqueeze(0)), D.Dirichlet(q[0].unsqueeze(0)))]


def _gamma_distribution(dtype):
    concentration, rate = _leaf([0.4, 1.7, 6.0], dtype), _leaf([1.5, 0.7, 3.0], dtype)
    law = D.Gamma(concentration, rate)
    value = gingham.tensor(np.array([0.1, 0.7, 3.0], dtype), device="cpu")
    return [law.log_prob(value), law.cdf(value), law.entropy()]


def _test_module(name: str):
    """A test file of tests/frontend as a module (its tables of cases: UNARY, KL_PAIRS)."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "tests", "frontend", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unary_test(dtype):
    """test_special's test_unary_special_functions_match_torch: every function in one program."""
    table = _test_module("test_special").UNARY
    return [function(_leaf(domain, dtype)) for function, _, domain, _ in table.values()]


def _kl_test(dtype):
    """test_distributions' test_kl_divergence_matches_torch: every pair in one program."""
    module = _test_module("test_distributions")
    params = {k: _leaf(v, dtype) for k, v in module.PARAMETERS.items()}
    return [D.kl_divergence(build_p(D, params), build_q(D, params))
            for build_p, build_q in module.KL_PAIRS.values()]


#: name -> outputs of lazy cpu tensors for a dtype
CASES: dict[str, Callable] = {
    "igamma": _igamma,
    "lgamma": _unary(gingham.lgamma),
    "digamma": _unary(gingham.digamma),
    "trigamma": _unary(lambda x: gingham.polygamma(1, x)),
    "polygamma3": _unary(lambda x: gingham.polygamma(3, x)),
    "mvlgamma": _unary(lambda x: gingham.mvlgamma(x.abs() + 2.0, 3)),
    "erfcx": _unary(special.erfcx),
    "log_ndtr": _unary(special.log_ndtr),
    "ndtri": _unary(lambda x: special.ndtri(x.sigmoid())),
    "i0": _unary(special.i0),
    "i1e": _unary(special.i1e),
    "gamma_distribution": _gamma_distribution,
    "kl": _kl,
    "unary_test": _unary_test,
    "kl_test": _kl_test,
}


def programs(outputs: list[Tensor]) -> list[tuple[str, object]]:
    """(name, bound program) of the forward and of the gradient of ``sum(outputs)``."""
    forward = _bound_graph(outputs, lambda t: not t._parents)[2]
    sum(out.sum() for out in outputs).backward()
    leaves = [t for t in graph_inputs(outputs) if t.requires_grad]
    done = {id(out) for out in outputs}
    backward = _bound_graph([leaf.grad for leaf in leaves],
                            lambda t: not t._parents or id(t) in done)[2]
    return [("forward", forward), ("backward", backward)]


def ptxas_figures(log: str) -> dict[str, int]:
    """Registers, stack frame and spilled bytes, summed over the functions in ``log``."""
    def total(pattern: str) -> int:
        return sum(int(n) for n in re.findall(pattern, log))
    return {"registers": max((int(n) for n in re.findall(r"Used (\d+) registers", log)),
                             default=-1),
            "stack": total(r"(\d+) bytes stack frame"),
            "spill_stores": total(r"(\d+) bytes spill stores"),
            "spill_loads": total(r"(\d+) bytes spill loads")}


def report(case: str, dtype: str, options: list[str], out: str | None,
           largest: int) -> list[dict]:
    """Compile each kernel of ``case`` in ``dtype``; print the ``largest`` by source size of
    each program (forward, backward) and a line for the rest. One row per kernel."""
    rows = []
    for phase, bound in programs(CASES[case](np.dtype(dtype))):
        found = []
        for kernel in lower_program(rewrite_program(bound), H200):
            unit, _ = unit_of(kernel, DIALECTS["cuda"])
            seconds, log = nvrtc_build(unit.source, options)
            found.append(dict(ptxas_figures(log), entry=unit.entry, seconds=seconds,
                              lines=unit.source.count("\n"), chars=len(unit.source)))
            if out:
                os.makedirs(out, exist_ok=True)
                name = f"{case}-{dtype}-{phase}-{unit.entry}.cu"
                with open(os.path.join(out, name), "w") as handle:
                    handle.write(unit.source)
        found.sort(key=lambda row: row["chars"], reverse=True)
        for row in found[:largest]:
            print(f"{case:18s} {dtype:7s} {phase:8s} {row['lines']:5d} lines {row['chars']:7d} "
                  f"chars {row['registers']:4d} regs {row['stack']:5d} B stack "
                  f"{row['spill_stores']:5d}/{row['spill_loads']:<5d} B spilled (st/ld)  "
                  f"NVRTC {row['seconds']:5.2f} s", flush=True)
        rest = found[largest:]
        if rest:
            print(f"{case:18s} {dtype:7s} {phase:8s} and {len(rest)} smaller kernels: stack "
                  f"<= {max(r['stack'] for r in rest)} B, spilled <= "
                  f"{max(r['spill_stores'] for r in rest)} B")
        rows += found
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (all by default)")
    parser.add_argument("--dtype", action="append", choices=["float32", "float64"],
                        help="repeatable; both by default")
    parser.add_argument("--largest", type=int, default=3,
                        help="kernels printed per program, largest source first")
    parser.add_argument("--out", help="a directory to write each kernel's source to")
    parser.add_argument("--nvrtc", default="--gpu-architecture=sm_90a -minimal "
                                           "--ptxas-options=--verbose")
    args = parser.parse_args()
    unknown = set(args.cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose among {', '.join(CASES)}")
    rows = []
    for case in args.cases or list(CASES):
        for dtype in args.dtype or ["float32", "float64"]:
            rows += report(case, dtype, args.nvrtc.split(), args.out, args.largest)
    print(f"{len(rows)} kernels: largest stack frame {max(r['stack'] for r in rows)} B, "
          f"spill {max(r['spill_stores'] for r in rows)} B, source "
          f"{max(r['chars'] for r in rows)} chars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
