"""A small interpreter of GPU kernel IR, all threads of a block in lockstep (NumPy over threads).

It runs the kernels that the GPU schedules build (``For`` of kind group / local, shared and
register arrays, barriers, and the CUDA ``WarpOp`` instructions with the semantics the PTX ISA
gives them) on the host, so that the index arithmetic of the tensor-core schedule, its
fragment layouts, swizzles, guards and epilogue are checked against NumPy where no GPU is.

What it checks beyond the values: loads, stores and copies stay inside their buffers (for the
threads whose condition holds), 16-byte copies and ldmatrix rows are 16-byte aligned, shared
memory is read only where written (unwritten shared memory holds NaN), and ``cp.async`` data is
read only after its ``wait_group`` (copies land when waited for, never earlier; from the copy's
issue until then its destination counts as unwritten, so a buffer overwritten while still read
fails too). It does not check barriers: lockstep execution has no races.

    sim = Simulator(kernel, {"A": a_bits, "B": b_bits, "C": c_out})
    sim.run()            # every block; outputs are written into the arrays given
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from gingham.compiler import kernel_ir as k

_HALF = {"bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype(np.float16)}
_NUMPY = {"float32": np.float32, "float64": np.float64, "int32": np.int64, "int64": np.int64,
          "uint32": np.uint32, "uint16": np.uint16, "bool": np.bool_, "int8": np.int64,
          "uint8": np.int64, "int16": np.int64, "uint64": np.uint64}


def _numpy_type(dtype: str):
    return np.float32 if dtype in _HALF else _NUMPY[dtype]


def _c_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _c_mod(a, b):
    return a - _c_div(a, b) * b


def run_program(bound, kernels: list[k.Kernel], arrays) -> list[np.ndarray]:
    """The outputs of ``bound`` (a bound Tile program) on ``arrays`` (its inputs), its
    ``kernels`` (lowered for some GPU's description) simulated in order. What no input gives
    (results, temporaries, scratch) starts as NaN, so that reading what no kernel wrote shows.

        outputs = run_program(bound, lower_program(bound, H200), arrays)
    """
    from gingham.tile.dtypes import DTYPES

    buffers = {name: np.ascontiguousarray(a).reshape(-1).copy()
               for name, a in zip(bound.program.input_names, arrays)}
    for kernel in kernels:
        for scratch in kernel.scratch:
            buffers.setdefault(scratch.name, np.full(scratch.size, np.nan, np.float32))
        for param in kernel.params:
            if param.name not in buffers:
                buffers[param.name] = np.full(math.prod(bound.shapes[param.name]), np.nan,
                                              DTYPES[param.dtype])
    for kernel in kernels:
        Simulator(kernel, buffers).run()
    return [buffers[name].reshape(bound.shapes[name]) for name in bound.program.outputs]


class Simulator:
    """Runs one kernel on host arrays (flat, in the parameters' storage types)."""

    def __init__(self, kernel: k.Kernel, buffers: dict[str, np.ndarray]) -> None:
        self.kernel = kernel
        self.buffers = buffers
        self.types = {p.name: p.dtype for p in kernel.params}
        for s in kernel.scratch:
            self.types[s.name] = s.dtype
        for name, array in buffers.items():
            assert array.ndim == 1, name

    # -- driving -------------------------------------------------------------------------------
    def run(self, groups=None) -> None:
        body = self.kernel.body
        if isinstance(body, k.For) and body.kind == "thread":  # one work-item per cell
            self.t = body.stop
            self.env = {body.var: np.arange(body.stop)}
            self.registers, self.shared, self.written = {}, {}, {}
            self.stmt(body.body, np.ones(self.t, bool))
            return
        shared_decls = [s for s in body.stmts if isinstance(s, k.LocalArray)]
        (grid,) = [s for s in body.stmts if isinstance(s, k.For)]
        assert grid.kind == "group" and isinstance(grid.body, k.For) and grid.body.kind == "local"
        threads = grid.body.stop
        for group in (range(grid.stop) if groups is None else groups):
            self.t = threads
            self.env: dict[str, np.ndarray] = {grid.var: np.full(threads, group, np.int64),
                                               grid.body.var: np.arange(threads)}
            self.registers: dict[str, np.ndarray] = {}
            self.shared: dict[str, np.ndarray] = {}
            self.written: dict[str, np.ndarray] = {}
            self.shapes: dict[str, tuple[int, ...]] = {}  # of the shared arrays
            self.pending: list[list] = []  # committed groups of copies not yet landed
            self.open: list = []  # copies issued since the last commit
            for decl in shared_decls:  # "shared" or "dynamic"
                if decl.scope == "dynamic":  # (several alias one allocation; not modelled)
                    size = np.dtype(_numpy_type(decl.dtype)).itemsize * math.prod(decl.shape)
                    assert size <= self.kernel.launch.shared_bytes, f"{decl.name} overruns"
                self.shared[decl.name] = np.full(math.prod(decl.shape), np.nan, np.float64)
                self.written[decl.name] = np.zeros(math.prod(decl.shape), bool)
                self.shapes[decl.name] = tuple(decl.shape)
            self.stmt(grid.body.body, np.ones(threads, bool))

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, s, mask) -> None:
        if not mask.any():
            return
        if isinstance(s, k.Block):
            for x in s.stmts:
                self.stmt(x, mask)
        elif isinstance(s, k.Comment):
            pass
        elif isinstance(s, k.Declare):
            value = self.expr(s.init, mask) if s.init is not None else np.zeros(self.t)
            self.env[s.name] = self._as(value, s.dtype)
        elif isinstance(s, k.Assign):
            old = self.env[s.name]
            value = np.broadcast_to(self.expr(s.value, mask), old.shape).astype(old.dtype)
            self.env[s.name] = np.where(mask, value, old)
        elif isinstance(s, k.LocalArray):
            if s.scope in ("register", "scalars"):  # scalars: an array to the simulator
                self.registers[s.name] = np.zeros((self.t,) + tuple(s.shape),
                                                  _numpy_type(s.dtype))
            else:
                raise AssertionError("shared arrays are declared at the kernel's top")
        elif isinstance(s, k.StoreLocal):
            value = self.expr(s.value, mask)
            self._store_local(s.array, s.index, value, mask)
        elif isinstance(s, k.Store):
            self._store_global(s, mask)
        elif isinstance(s, k.For):
            start = self._uniform(s.start, mask)
            stop = self._uniform(s.stop, mask)
            for value in range(start, stop, s.step):
                self.env[s.var] = np.full(self.t, value, np.int64)
                self.stmt(s.body, mask)
        elif isinstance(s, k.If):
            cond = self.expr(s.cond, mask).astype(bool)
            self.stmt(s.then, mask & cond)
            if s.otherwise is not None:
                self.stmt(s.otherwise, mask & ~cond)
        elif isinstance(s, k.Barrier):
            assert mask.all(), "a barrier under a condition"
        elif isinstance(s, k.WarpOp):
            self.warp_op(s, mask)
        elif isinstance(s, k.CopyLocal):
            self._copy_local(s, mask)
        else:
            raise NotImplementedError(type(s).__name__)

    def _as(self, value, dtype):
        value = np.broadcast_to(np.asarray(value), (self.t,))
        return value.astype(_numpy_type(dtype))

    def _uniform(self, value, mask) -> int:
        if isinstance(value, int):
            return value
        v = self.expr(value, mask)[mask]
        assert (v == v[0]).all(), "a loop bound that differs between threads"
        return int(v[0])

    def _store_local(self, array, index, value, mask) -> None:
        idx = [self.expr(i, mask) for i in index]
        if array in self.registers:
            regs = self.registers[array]
            rows = np.nonzero(mask)[0]
            regs[(rows,) + tuple(i[mask] for i in idx)] = value[mask]
            return
        flat = self._flat(array, idx, mask)[mask]
        shared = self.shared[array]
        assert ((flat >= 0) & (flat < shared.size)).all(), f"shared store out of {array}"
        shared[flat] = value[mask]
        self.written[array][flat] = True

    def _flat(self, array: str, idx: list, mask) -> np.ndarray:
        """The flat element index of a shared array's (row-major) element ``idx``; each
        coordinate must be inside its own extent (a row overrun is an error, not the next
        row)."""
        if len(idx) == 1:
            return idx[0]
        shape = self.shapes[array]
        assert len(idx) == len(shape), f"{len(idx)} indices into {array}{list(shape)}"
        flat = np.zeros(self.t, np.int64)
        for axis, (i, extent) in enumerate(zip(idx, shape)):
            i = np.broadcast_to(np.asarray(i, np.int64), (self.t,))
            assert ((i[mask] >= 0) & (i[mask] < extent)).all(), f"{array} axis {axis} overrun"
            flat = flat * extent + i
        return flat

    def _store_global(self, s: k.Store, mask) -> None:
        self._store_values(s.buffer, self.expr(s.index, mask), self.expr(s.value, mask), mask)

    def _copy_local(self, s: k.CopyLocal, mask) -> None:
        """``width`` consecutive elements, one at a time through the loads and stores above
        (their checks apply), after checking that an aligned copy's first elements are."""
        def element(name: str, index: tuple, offset: int):
            *lead, last = index
            at = (*lead, k.BinOp("+", last, k.Const(offset, "int64"), "int64"))
            if name in self.buffers:  # a global buffer: one flat index
                return k.Load(name, at[0], s.dtype)
            return k.LoadLocal(name, at, s.dtype)

        if s.aligned:
            for name, index in ((s.src, s.src_index), (s.dst, s.dst_index)):
                idx = [self.expr(i, mask) for i in index]
                first = (idx[-1] if name in self.registers else
                         self._flat(name, idx, mask) if name in self.shared else idx[0])
                first = np.broadcast_to(np.asarray(first), (self.t,))
                assert (first[mask] % s.width == 0).all(), f"a misaligned vector copy of {name}"
        for offset in range(s.width):
            value = self.expr(element(s.src, s.src_index, offset), mask)
            target = element(s.dst, s.dst_index, offset)
            if s.dst in self.buffers:
                self._store_values(s.dst, self.expr(target.index, mask), value, mask)
            else:
                self._store_local(s.dst, target.index, value, mask)

    def _store_values(self, name: str, index, value, mask) -> None:
        """Store ``value`` at ``index`` of global buffer ``name`` for the threads of ``mask``."""
        index = np.broadcast_to(np.asarray(index), (self.t,))[mask]
        value = np.broadcast_to(np.asarray(value), (self.t,))[mask]
        buffer = self.buffers[name]
        assert ((index >= 0) & (index < buffer.size)).all(), f"store out of {name}"
        storage = self.types[name]
        if storage in _HALF:
            buffer.view(_HALF[storage])[index] = value.astype(np.float32).astype(_HALF[storage])
        else:
            buffer[index] = value

    # -- warp instructions ----------------------------------------------------------------------
    def warp_op(self, s: k.WarpOp, mask) -> None:
        if s.op == "cp_async":
            array, dst = s.shared
            buffer, src = s.src
            dst = self.expr(dst, mask)
            src = self.expr(src, mask)
            valid = self.expr(s.args[0], mask).astype(bool)
            data = self.buffers[buffer]
            for t in np.nonzero(mask)[0]:
                assert dst[t] % 8 == 0 and src[t] % 8 == 0, "a misaligned 16-byte copy"
                if valid[t]:
                    assert 0 <= src[t] and src[t] + 8 <= data.size, f"copy out of {buffer}"
                    chunk = self._bits(buffer, data[src[t]:src[t] + 8])
                else:
                    chunk = np.zeros(8)
                # Until it lands, the destination holds nothing that may be read: a buffer
                # still being read when its next copies are issued fails as unwritten.
                self.written[array][dst[t]:dst[t] + 8] = False
                self.open.append((array, int(dst[t]), chunk))
            return
        assert mask.all(), f"{s.op} under a condition"
        if s.op == "cp_async_commit":
            self.pending.append(self.open)
            self.open = []
        elif s.op == "cp_async_wait":
            keep = int(s.variant)
            landing = self.pending[:len(self.pending) - keep] if keep else self.pending
            for group in landing:
                for array, dst, chunk in group:
                    assert 0 <= dst and dst + 8 <= self.shared[array].size
                    self.shared[array][dst:dst + 8] = chunk
                    self.written[array][dst:dst + 8] = True
            self.pending = self.pending[len(landing):]
        elif s.op == "ldmatrix":
            self.ldmatrix(s)
        elif s.op == "mma":
            self.mma(s)
        elif s.op == "wgmma":
            self.wgmma(s)
        elif s.op in ("wgmma_fence", "wgmma_commit", "wgmma_wait", "wgmma_hold",
                      "fence_async_shared"):
            pass  # products run at issue in lockstep: nothing is in flight to order or wait for
        else:
            raise NotImplementedError(s.op)

    def _bits(self, buffer, values):
        storage = self.types[buffer]
        return values.view(np.uint16).astype(np.float64) if storage in _HALF else values

    def ldmatrix(self, s: k.WarpOp) -> None:
        array, index = s.shared
        shared, written = self.shared[array], self.written[array]
        rows = self.expr(index, np.ones(self.t, bool))
        warps = self.t // 32
        lane = np.arange(32)
        for j, reg in enumerate(s.regs):
            out = np.zeros(self.t, np.uint32)
            for w in range(warps):
                starts = rows[32 * w + 8 * j: 32 * w + 8 * j + 8]
                assert (starts % 8 == 0).all(), "a misaligned ldmatrix row"
                cols = starts[:, None] + np.arange(8)[None, :]
                assert written[cols].all(), f"ldmatrix reads unwritten {array}"
                matrix = shared[cols]  # [row][column], 16-bit patterns
                if s.variant == "trans":  # thread t: column t / 4, rows 2 (t % 4) + 0, 1
                    matrix = matrix.T
                # thread t: row t / 4, columns 2 (t % 4) + 0, 1
                lo, hi = matrix[lane // 4, 2 * (lane % 4)], matrix[lane // 4, 2 * (lane % 4) + 1]
                out[32 * w:32 * w + 32] = lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)
            self._store_local(reg.array, reg.index, out, np.ones(self.t, bool))

    def mma(self, s: k.WarpOp) -> None:
        everyone = np.ones(self.t, bool)
        half = _HALF[s.variant]

        def unpack(reg):
            bits = self.expr(reg, everyone).astype(np.uint32)
            lo = (bits & 0xFFFF).astype(np.uint16).view(half).astype(np.float64)
            hi = (bits >> 16).astype(np.uint16).view(half).astype(np.float64)
            return lo, hi

        a = [unpack(r) for r in s.args[:4]]
        b = [unpack(r) for r in s.args[4:6]]
        c = [self.expr(r, everyone).astype(np.float64) for r in s.regs]
        lane = np.arange(32)
        g, q = lane // 4, lane % 4
        results = [np.zeros(self.t) for _ in range(4)]
        for w in range(self.t // 32):
            sl = slice(32 * w, 32 * w + 32)
            A = np.zeros((16, 16))
            B = np.zeros((16, 8))
            C = np.zeros((16, 8))
            for r, (row, col) in enumerate(((g, 2 * q), (g + 8, 2 * q), (g, 2 * q + 8),
                                            (g + 8, 2 * q + 8))):
                A[row, col], A[row, col + 1] = a[r][0][sl], a[r][1][sl]
            for r, krow in enumerate((2 * q, 2 * q + 8)):
                B[krow, g], B[krow + 1, g] = b[r][0][sl], b[r][1][sl]
            for r, (row, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q),
                                            (g + 8, 2 * q + 1))):
                C[row, col] = c[r][sl]
            D = (A @ B + C).astype(np.float32)
            for r, (row, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q),
                                            (g + 8, 2 * q + 1))):
                results[r][sl] = D[row, col]
        for reg, value in zip(s.regs, results):
            self._store_local(reg.array, reg.index, value.astype(np.float32), everyone)

    def _smem_matrix(self, array: str, start: int, rows: int, cols: int, mn_major: bool,
                     lbo: int, sbo: int) -> np.ndarray:
        """The rows x cols (MN x K) operand a wgmma descriptor names, as the PTX ISA defines
        its canonical 128-byte-swizzled layouts (addresses in bytes from the array's start,
        which the kernel aligns to 1024): K-major, element (r, c) at start + (r // 8) SBO +
        (r % 8) 128 + 2 c; MN-major, at start + (r // 64) LBO + 2 (r % 64) + (c // 8) SBO +
        (c % 8) 128; then the swizzle XORs address bits 4-6 with bits 7-9."""
        r = np.arange(rows)[:, None]
        c = np.arange(cols)[None, :]
        if mn_major:
            byte = 2 * start + (r // 64) * lbo + 2 * (r % 64) + (c // 8) * sbo + (c % 8) * 128
        else:
            byte = 2 * start + (r // 8) * sbo + (r % 8) * 128 + 2 * c
        byte = byte ^ (((byte >> 7) & 7) << 4)
        index = byte // 2
        shared, written = self.shared[array], self.written[array]
        assert ((index >= 0) & (index < shared.size)).all(), f"wgmma reads outside {array}"
        assert written[index].all(), f"wgmma reads unwritten {array}"
        return shared[index]

    def wgmma(self, s: k.WarpOp) -> None:
        """D (64 x N, the accumulators of a warpgroup's 128 threads) += A (64 x 16) B (16 x N)."""
        everyone = np.ones(self.t, bool)
        half = _HALF[s.variant]
        n, trans_a, trans_b, lbo_a, sbo_a, lbo_b, sbo_b = s.layout
        array = s.shared[0]
        starts = [self.expr(a, everyone) for a in s.args]
        assert self.t % 128 == 0, "wgmma needs whole warpgroups"
        accs = [self.expr(r, everyone).astype(np.float64) for r in s.regs]
        lane = np.arange(32)
        g, q = lane // 4, lane % 4
        results = [np.zeros(self.t) for _ in s.regs]
        for group in range(self.t // 128):
            sl = slice(128 * group, 128 * group + 128)
            start_a, start_b = (int(x[sl][0]) for x in starts)
            assert all((x[sl] == x[sl][0]).all() for x in starts), "descriptors differ in a group"

            def values(bits):
                return bits.astype(np.uint16).view(half).astype(np.float64)

            A = values(self._smem_matrix(array, start_a, 64, 16, bool(trans_a), lbo_a, sbo_a))
            B = values(self._smem_matrix(array, start_b, n, 16, bool(trans_b), lbo_b, sbo_b))
            C = np.zeros((64, n))
            cells = []
            for w in range(4):
                for j in range(n // 8):
                    for r, (row, col) in enumerate(((g, 2 * q), (g, 2 * q + 1), (g + 8, 2 * q),
                                                    (g + 8, 2 * q + 1))):
                        cells.append((w, 4 * j + r, 16 * w + row, 8 * j + col))
            for w, reg, row, col in cells:
                C[row, col] = accs[reg][128 * group + 32 * w + lane]
            D = (A @ B.T + C).astype(np.float32)
            for w, reg, row, col in cells:
                results[reg][128 * group + 32 * w + lane] = D[row, col]
        for reg, value in zip(s.regs, results):
            self._store_local(reg.array, reg.index, value.astype(np.float32), everyone)

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, e, mask):
        if isinstance(e, k.Var):
            return self.env[e.name]
        if isinstance(e, k.Const):
            return np.full(self.t, e.value, _numpy_type(e.dtype))
        if isinstance(e, k.Load):
            index = self.expr(e.index, mask)
            buffer = self.buffers[e.buffer]
            inside = (index >= 0) & (index < buffer.size)
            assert inside[mask].all(), f"load out of {e.buffer}: {index[mask & ~inside][:4]}"
            values = buffer[np.where(inside, index, 0)]
            storage = self.types[e.buffer]
            if storage in _HALF:
                if e.dtype == "uint16":
                    return values.view(np.uint16)
                return values.view(_HALF[storage]).astype(np.float32)
            return values
        if isinstance(e, k.LoadLocal):
            idx = [self.expr(i, mask) for i in e.index]
            if e.array in self.registers:
                return self.registers[e.array][(np.arange(self.t),) + tuple(idx)]
            flat = self._flat(e.array, idx, mask)
            shared = self.shared[e.array]
            inside = (flat >= 0) & (flat < shared.size)
            assert inside[mask].all(), f"shared load out of {e.array}"
            flat = np.where(inside, flat, 0)
            assert self.written[e.array][flat[mask]].all(), f"reads unwritten {e.array}"
            return shared[flat]
        if isinstance(e, k.Cast):
            value = self.expr(e.a, mask)
            if e.dtype == "bool":
                return value != 0
            return value.astype(_numpy_type(e.dtype))
        if isinstance(e, k.UnOp):
            value = self.expr(e.a, mask)
            return {"-": lambda v: -v, "!": lambda v: ~v.astype(bool),
                    "~": lambda v: ~v}[e.op](value)
        if isinstance(e, k.Select):
            cond = self.expr(e.cond, mask).astype(bool)
            yes = self.expr(e.if_true, mask & cond)
            no = self.expr(e.if_false, mask & ~cond)
            return np.where(cond, yes, no).astype(_numpy_type(e.dtype))
        if isinstance(e, k.BinOp):
            return self.binop(e, mask)
        if isinstance(e, k.Call):
            args = [self.expr(a, mask) for a in e.args]
            fn = {"relu": lambda x: np.maximum(x, 0), "max": np.maximum, "min": np.minimum,
                  "exp": np.exp, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
                  "rsqrt": lambda x: 1 / np.sqrt(x), "log": np.log,
                  # a half-precision value kept in float32 registers, rounded to its type
                  "round_float16": lambda x: x.astype(np.float16).astype(np.float32),
                  "round_bfloat16": lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float32)}
            return fn[e.fn](*args).astype(_numpy_type(e.dtype))
        raise NotImplementedError(type(e).__name__)

    def binop(self, e: k.BinOp, mask):
        a = self.expr(e.a, mask)
        if e.op == "&&":
            a = a.astype(bool)
            return a & self.expr(e.b, mask & a).astype(bool)
        if e.op == "||":
            a = a.astype(bool)
            return a | self.expr(e.b, mask & ~a).astype(bool)
        b = self.expr(e.b, mask)
        integer = not e.dtype.startswith("float") and e.dtype != "bool"
        if e.op == "/" and integer:
            safe = np.where(b == 0, 1, b)
            return _c_div(a, safe)
        if e.op == "%" and integer:
            safe = np.where(b == 0, 1, b)
            return _c_mod(a, safe)
        ops = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
               "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "==": np.equal, "!=": np.not_equal, "^": np.bitwise_xor, "&": np.bitwise_and,
               "|": np.bitwise_or}
        result = ops[e.op](a, b)
        if e.op in ("<", "<=", ">", ">=", "==", "!="):
            return result
        return result.astype(_numpy_type(e.dtype))
