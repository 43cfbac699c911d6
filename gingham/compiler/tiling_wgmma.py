"""Warpgroup tensor-core schedule (Hopper, sm_90a ``wgmma``) for 16-bit float contractions.

The same contractions as :mod:`gingham.compiler.tiling_tc` (bf16 / fp16 operands, float32
accumulation: matmuls, convolutions as implicit GEMM and their gradients), the same staging
(the operands' slices copied by ``cp.async`` into a ring of shared-memory buffers, im2col
decoded while staging, guards for padding and ragged edges), the same epilogue, but the
products are Hopper's asynchronous warpgroup instructions:

* a block is one or two warpgroups (4 warps, 128 threads each) along M; warpgroup g computes
  one or two 64-row slabs of the block's TM x TN tile (rows 64 g .. or 128 g ..) with one
  ``wgmma.mma_async m64nTNk16`` per slab and 16 values of K, reading A and B straight from
  shared memory (no ldmatrix, no fragment registers: a thread holds only its TN / 2
  accumulators per slab);
* the K step is 64 16-bit values, so that each staged row is 128 bytes, the width of the
  instruction's 128-byte swizzle: in shared memory the 16-byte chunk c of row r sits at chunk
  ``c ^ (r % 8)``, rows 128 bytes apart, every buffer 1024-byte aligned. A K-major operand
  (K fastest in memory) is its tile rows of 64 K values; an MN-major one (the tile fastest:
  the gradients read their operands so) is cut into panels of 64 tile values, each panel its
  64 K rows of 128 bytes. The matrix descriptors say so: K-major, 8-row groups 1024 bytes
  apart; MN-major, 64-value panels ``64 * 128`` bytes apart, 8-row groups of K 1024 apart;
* the pipeline: copies run STAGES - 2 K steps ahead; a step waits for its own copies, makes
  them visible to the tensor cores (``fence.proxy.async``) and passes a barrier, issues the
  copies STAGES - 2 steps ahead into the buffer that the products of two steps back read,
  then its own products as one group, and waits until only that group is in flight, so one
  group of products always overlaps the next step's barrier and copies;
* the accumulators are laid out per warp as ``mma.sync``'s m16n8 products (warp w of a
  warpgroup holds rows 16 (w % 4) .. + 15 of each slab), so each cell's epilogue is
  tiling_tc's (:meth:`WgmmaKernel.epilogue` only places the cells).

Compile for ``sm_90a`` (the CUDA backend does on compute capability 9.0). Chosen over
``mma.sync`` where it applies (:func:`gingham.compiler.tiling_tc.choose_config`), except for
operands staged element by element (a 3-channel convolution: slower here).

Measured on the H200 against ``mma.sync`` in the same run (``gingham bench ops --device cuda:0
--only gemm,conv --dtype bf16 --gemm-sizes 4096,8192``, ``GINGHAM_WGMMA=0`` for the other):
bf16 GEMM 8192 2.02 ms = 546 TFLOP/s, 0.80x cuBLAS (2.67 ms, 0.60x); GEMM 4096 0.74x (0.56x);
the CIFAR conv layer forward + backward 159 us (189). A bf16 ResNet-9 step's 28 tensor-core
kernels, each timed synchronised: 5.4 ms (6.7 with mma.sync); the short-K convolutions
(K = 576-1152) stay at 200-310 TFLOP/s. Nsight Compute on the 64 -> 128 channel forward
(128x128 tiles, 9 K steps, 0.32 ms): L2 throughput 75%, SM throughput 25%, the warps
stalled mostly on the LSU queue (the cp.async copies; L1 hit rate 54% for the im2col
operand): a 128x128 tile's 32 KiB of operands a K step is more than L2 delivers to keep the
tensor cores busy. Persistent blocks that carry the pipeline across tiles (so a tile's fill
overlaps the tile before) measured 0-15% slower on four such convolutions
(``tools/bench_tensor_cores.py --resnet9-sweep``): the fill is not what limits them; fewer
L2 bytes per product is (TMA multicast across a cluster, or a filter kept in shared memory).

    kernels = tensor_core_contraction(plan, ctx, "k0_C", h200)   # wgmma on an H200
"""

from __future__ import annotations

from . import kernel_ir as k
from .tiling_gpu import Staging
from .tiling_tc import TensorCoreKernel

#: 16-bit values of one staged row: the 128-byte swizzle's width, and the K step.
ROW = 64
#: Rows of one warpgroup product (m64).
GROUP_ROWS = 64
#: Bytes between 8-row groups of a 128-byte swizzled layout (the descriptors' stride).
ATOM_BYTES = 1024
#: Shared memory alignment the swizzle needs (it XORs address bits 4-6 with bits 7-9).
ALIGN = 1024


class WgmmaKernel(TensorCoreKernel):
    """The kernel of one warpgroup tensor-core schedule (config.instruction == "wgmma"): the
    staging, K decoding, hoisting and epilogue of :class:`TensorCoreKernel`; its own shared
    layout (:meth:`shared_index`) and K loop (:meth:`build`)."""

    def shared_index(self, stage: Staging, base: k.Expr, kk: k.Expr, s: k.Expr) -> k.Expr:
        """Element (kk, s) of the ring buffer at element ``base`` in the 128-byte swizzle:
        K-major, row s of ROW values; MN-major, panel s // ROW, row kk. Chunk c of row r at
        chunk c ^ (r % 8)."""
        e, t = self.e, self.itype
        index = e.add(base, self.region(stage))
        if stage.side.k_fastest:
            row, col = s, kk
        else:
            row, col = kk, e.mod(s, ROW)
            index = e.add(index, e.mul(e.div(s, ROW), ROW * self.cfg.tile_k))
        chunk = k.BinOp("^", e.div(col, 8), e.mod(row, 8), t)
        index = e.add(index, e.mul(row, ROW))
        return e.add(e.add(index, e.mul(chunk, 8)), e.mod(col, 8))

    def operand(self, stage: Staging, base: k.Expr, step: k.Expr, rows: k.Expr
                ) -> tuple[k.Expr, int, int, int]:
        """(element index of the instruction's first element, transposed flag, leading byte
        offset, stride byte offset) of this operand for k16 step ``step`` of the buffer at
        ``base``, its tile rows starting at ``rows`` (a multiple of 64)."""
        e = self.e
        start = e.add(base, self.region(stage))
        if stage.side.k_fastest:
            # Rows of 128 bytes; 16 K values further is 32 bytes into each (swizzled) row.
            return e.add(e.add(start, e.mul(rows, ROW)), e.mul(step, 16)), 0, 16, ATOM_BYTES
        # Panels of 64 tile values; 16 K rows further is 16 rows of 128 bytes.
        panel = ROW * self.cfg.tile_k
        return (e.add(e.add(start, e.mul(e.div(rows, ROW), panel)), e.mul(step, 16 * ROW)), 1,
                panel * 2, ATOM_BYTES)

    def accumulators(self, mi: int) -> tuple[k.LoadLocal, ...]:
        """The registers of m64 product ``mi`` of this thread's warpgroup, in wgmma order."""
        e = self.e
        return tuple(k.LoadLocal("gt_acc", (e.c(mi), e.c(j), e.c(q)), "float32")
                     for j in range(self.ni) for q in range(4))

    def group_rows(self, mi: int) -> k.Expr:
        """First tile row of m64 product ``mi`` of this thread's warpgroup (a warpgroup's
        products are consecutive 64-row slabs)."""
        e = self.e
        return e.add(e.mul(e.div(e.v("gt_warp"), 4), GROUP_ROWS * self.mi), GROUP_ROWS * mi)

    def products(self, base: k.Expr) -> list[k.Stmt]:  # type: ignore[override]
        """This warpgroup's products of one K step from the buffer at ``base``: per 16
        values of K one m64nTNk16 per 64-row slab, then their commit."""
        e, cfg = self.e, self.cfg
        stage_a, stage_b = self.stages
        # The k16 steps an unrolled loop: each instruction names all its accumulators, so
        # written out they would make the source several times longer.
        step = e.v("gt_ks")
        b, trans_b, lbo_b, sbo_b = self.operand(stage_b, base, step, e.c(0))
        issue: list[k.Stmt] = []
        for mi in range(self.mi):
            a, trans_a, lbo_a, sbo_a = self.operand(stage_a, base, step, self.group_rows(mi))
            issue.append(k.WarpOp("wgmma", regs=self.accumulators(mi), args=(a, b),
                                  shared=(self.SHARED, e.c(0)), variant=self.operands,
                                  layout=(cfg.tile_n, trans_a, trans_b, lbo_a, sbo_a,
                                          lbo_b, sbo_b)))
        return [k.WarpOp("wgmma_fence"),
                k.For(step.name, 0, cfg.tile_k // 16, k.block(*issue), kind="unroll"),
                k.WarpOp("wgmma_commit")]

    def epilogue(self) -> k.Stmt:
        """Each accumulator's cell: m64 product mi of warpgroup g covers tile rows
        64 (g mi_count + mi) ..; warp w % 4 its rows 16 (w % 4) ..; then as mma's m16n8
        c0-c3. Unrolled, the loops read a copy of the accumulators (scalar variables, which
        a loop cannot index) in an array."""
        e = self.e
        lane, mi, ni, q = e.v("gt_lane"), e.v("gt_mi"), e.v("gt_ni"), e.v("gt_q")
        m = e.add(e.v("gt_m0"), e.mul(e.div(e.v("gt_warp"), 4), GROUP_ROWS * self.mi))
        m = e.add(e.add(m, e.mul(mi, GROUP_ROWS)), e.mul(e.mod(e.v("gt_warp"), 4), 16))
        m = e.add(e.add(m, e.div(lane, 4)), e.mul(e.div(q, 2), 8))
        n = e.add(e.add(e.v("gt_n0"), e.mul(ni, 8)), e.add(e.mul(e.mod(lane, 4), 2), e.mod(q, 2)))
        return self.cells_epilogue(m, n, indexable=False)

    def build(self) -> k.Kernel:
        cfg, e = self.cfg, self.e
        stages, size = cfg.stages, self.buffer_elements
        assert cfg.instruction == "wgmma" and cfg.tile_k == ROW and self.mi in (1, 2)
        elements = stages * size
        body: list[k.Stmt] = [
            k.Declare("gt_lane", self.itype, e.mod(e.v("gt_tid"), 32)),
            k.Declare("gt_warp", self.itype, e.div(e.v("gt_tid"), 32)),
        ]
        body += self.group_coordinates()
        for stage in self.stages:
            body += self.hoisted(stage)
        accs = tuple(r for mi in range(self.mi) for r in self.accumulators(mi))
        cells = self.accumulator_cells()
        # Scalar variables, not an array: every product names all of them in inline PTX, and
        # NVVM's time on an array so used grows with the square of the products (a 128x256
        # tile's kernel: 0.51 s of NVRTC with an array, 0.39 s with scalars).
        body.append(k.LocalArray("gt_acc", "float32", (self.mi, self.ni, 4), "scalars"))
        body += [k.StoreLocal("gt_acc", cell, k.Const(0.0, "float32")) for cell in cells]
        # Split-K's K loop has a run-time trip count; without this, NVVM moved the zeroing
        # past the loop's entry and ptxas serialised all the products (C7515).
        body.append(k.WarpOp("wgmma_hold", regs=accs))
        first, slice_steps = self.k_slice(body)
        steps = e.c(slice_steps) if isinstance(slice_steps, int) else slice_steps
        ahead = stages - 2  # K steps whose copies fly while one computes
        commit = k.WarpOp("cp_async_commit")
        s = e.v("gt_ps")
        body.append(k.For(s.name, 0, ahead, k.block(
            k.If(k.BinOp("<", s, steps, "bool"),
                 k.block(*self.issue(e.add(first, s), e.mul(s, size)))),
            commit), kind="unroll"))
        kt = e.v("gt_kt")
        later = e.add(kt, ahead)
        loop = k.block(
            # This step's copies (this thread's) landed; the tensor cores may see them once
            # every thread has fenced its own and passed the barrier.
            k.WarpOp("cp_async_wait", variant=str(ahead - 1)),
            k.WarpOp("fence_async_shared"),
            k.Barrier(),
            # Buffer (kt + ahead) % stages was read by the products of step kt - 2, which
            # every warpgroup waited for before the barrier.
            k.If(k.BinOp("<", later, steps, "bool"),
                 k.block(*self.issue(e.add(first, later), e.mul(e.mod(later, stages), size)))),
            commit,
            *self.products(e.mul(e.mod(kt, stages), size)),
            k.WarpOp("wgmma_wait", variant="1"),
        )
        body.append(k.For("gt_kt", 0, steps, loop))
        body += [k.WarpOp("wgmma_wait", regs=accs, variant="0"),
                 k.WarpOp("cp_async_wait", variant="0"),
                 self.epilogue()]
        return self.kernel(self.ring_arrays(elements, ALIGN), body)

    def schedule(self) -> str:
        return super().schedule().replace("mma.sync m16n8k16", f"wgmma m64n{self.cfg.tile_n}k16")
