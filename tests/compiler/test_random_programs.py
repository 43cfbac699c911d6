"""Property tests of whole programs: fusion must never change a result.

Hypothesis writes small random Tile programs (2-6 statements over 2-3 inputs of sizes 1-6):
elementwise chains with broadcasting, full and partial reductions (with and without a
keepdim-style length-1 axis), slices and shifted or strided reads, length-1 output axes that
index a longer operand axis, transposes, contractions of two operands (matmul-like, outer
products, convolution-like ``X[i + k] * W[k]``), concatenation-like ``=`` writes over a
``default``, and statements that read an earlier result at shifted cells. Several of their
results are outputs, some of them intermediates that later statements read too.

Each program runs on every device the run discovers; its outputs AND its gradients (``vjp``
with a random cotangent) are compared with an oracle written here: each statement evaluated by
the valid-index rule, enumerated over its index variables, in PyTorch float64 (so autograd gives
the exact vector-Jacobian product). The planner (fusion, recompute, sibling reductions,
hoisting, CSE, split reductions, tiling) may regroup the statements however it likes; the
numbers must stay those of the statements one by one.

To hunt with more examples than CI runs: ``GINGHAM_FUZZ_EXAMPLES=500 python -m pytest -q -n 0
tests/compiler/test_random_programs.py`` (pytest's faulthandler then prints stacks after 180 s
of one test: that is the many examples, not a hang). ``GINGHAM_FUZZ_LAST=FILE`` writes each
program to FILE before it runs, so a program that hangs leaves itself behind.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from gingham import tile

# Each example compiles a forward and a gradient program per device: about 40 keep the file
# near a minute on cpu + opencl:0 of a 2-core machine.
MAX_EXAMPLES = int(os.environ.get("GINGHAM_FUZZ_EXAMPLES", "40"))

SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
)


# -- programs as data ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Affine:
    """``coef * var + const`` (``var`` None: the constant alone), rendered as Tile text."""

    var: str | None
    coef: int = 1
    const: int = 0

    def render(self) -> str:
        if self.var is None:
            return str(self.const)
        text = self.var if self.coef == 1 else f"{self.coef}*{self.var}"
        if self.const:
            text += f" + {self.const}" if self.const > 0 else f" - {-self.const}"
        return text

    def eval(self, env: dict[str, np.ndarray]) -> np.ndarray | int:
        return self.const if self.var is None else self.coef * env[self.var] + self.const


@dataclasses.dataclass(frozen=True)
class Access:
    """``name[idx...]``; an index is one Affine or the sum of two (``i + k``, a convolution tap)."""

    name: str
    idx: tuple[tuple[Affine, ...], ...]

    def render(self) -> str:
        return f"{self.name}[{', '.join(' + '.join(t.render() for t in e) for e in self.idx)}]"


@dataclasses.dataclass(frozen=True)
class Contraction:
    """``out[out_idx : sizes] = agg(operands joined by *), constraints default``."""

    out: str
    out_idx: tuple[Affine, ...]
    sizes: tuple[int, ...]
    agg: str
    operands: tuple[Access, ...]
    constraints: tuple[tuple[str, int], ...] = ()
    default: str | None = None

    def render(self) -> str:
        lhs = (f"{self.out}[{', '.join(e.render() for e in self.out_idx)} : "
               f"{', '.join(map(str, self.sizes))}]") if self.sizes else f"{self.out}[]"
        rhs = " * ".join(a.render() for a in self.operands)
        tail = "".join(f", {v} < {b}" for v, b in self.constraints)
        if self.default:
            tail += f" default {self.default}"
        return f"{lhs} = {self.agg}({rhs}){tail};"


@dataclasses.dataclass(frozen=True)
class Elementwise:
    """``out = expr;`` with ``expr`` a small tree: a name, a float, (op, a, b) or (fn, a)."""

    out: str
    expr: object

    def render(self) -> str:
        return f"{self.out} = {_render_expr(self.expr)};"


UNARY = {
    "tanh": ("tanh({})", torch.tanh),
    "exp_tanh": ("exp(tanh({}))", lambda x: torch.exp(torch.tanh(x))),
    "log1p_sq": ("log({0} * {0} + 1)", lambda x: torch.log(x * x + 1)),
}
BINARY = {"+": torch.add, "-": torch.sub, "*": torch.mul}


def _render_expr(e) -> str:
    if isinstance(e, str):
        return e
    if isinstance(e, float):
        return repr(e)
    if len(e) == 2:
        return UNARY[e[0]][0].format(_render_expr(e[1]))
    return f"({_render_expr(e[1])} {e[0]} {_render_expr(e[2])})"


@dataclasses.dataclass(frozen=True)
class RandomProgram:
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    statements: tuple[object, ...]
    outputs: tuple[str, ...]
    dtype: str
    seed: int

    def render(self) -> str:
        header = ", ".join(f"{n}[{', '.join(f'{n}{d}' for d in range(len(s)))}]"
                           for n, s in self.inputs)
        body = "\n".join(f"    {s.render()}" for s in self.statements)
        return f"function ({header}) -> ({', '.join(self.outputs)}) {{\n{body}\n}}\n"


# -- the generator -------------------------------------------------------------------------------


VARS = "ijklmnpq"
#: Most cells of a result: a long axis (``random_programs(long_axis=True)``) times another long
#: one would make programs whose compile and oracle cost more than what they add.
MAX_CELLS = 20000


def _cells(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


def _offset_index(draw, var: str) -> Affine:
    """A read of one axis: plain mostly, else shifted and/or strided by 2."""
    kind = draw(st.sampled_from(["plain", "plain", "shift", "stride"]))
    if kind == "plain":
        return Affine(var)
    if kind == "shift":
        return Affine(var, 1, draw(st.sampled_from([-2, -1, 1, 2])))
    return Affine(var, 2, draw(st.integers(0, 1)))


@st.composite
def _elementwise(draw, scope, out):
    x = draw(st.sampled_from(sorted(scope)))
    partners = [n for n in sorted(scope) if _compatible(scope[x], scope[n])
                and _cells(np.broadcast_shapes(scope[x], scope[n])) <= MAX_CELLS]
    y = draw(st.sampled_from(partners + [0.5, -1.5]))
    op = draw(st.sampled_from(sorted(BINARY)))
    expr = (op, x, y) if draw(st.booleans()) else (op, y, x)
    if draw(st.booleans()):
        expr = (draw(st.sampled_from(sorted(UNARY))), expr)
    shape = np.broadcast_shapes(scope[x], scope[y] if isinstance(y, str) else ())
    return Elementwise(out, expr), tuple(shape)


@st.composite
def _reduction(draw, scope, out):
    """A full or partial reduction, reduced axes dropped or kept as length-1 (keepdim)."""
    x = draw(st.sampled_from([n for n in sorted(scope) if scope[n]]))
    shape = scope[x]
    variables = VARS[: len(shape)]
    reduced = draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
    keepdim = draw(st.booleans())
    out_idx, sizes = [], []
    for axis, var in enumerate(variables):
        if axis not in reduced:
            out_idx.append(Affine(var))
            sizes.append(shape[axis])
        elif keepdim:
            out_idx.append(Affine(None, 0, 0))
            sizes.append(1)
    agg = draw(st.sampled_from(["+", "+", ">", "<"]))
    access = Access(x, tuple((Affine(v),) for v in variables))
    return Contraction(out, tuple(out_idx), tuple(sizes), agg, (access,)), tuple(sizes)


@st.composite
def _slice(draw, scope, out):
    """Shifted / strided reads, sizes of the output drawn freely (a length-1 axis over a longer
    operand axis is a slice), axes possibly permuted."""
    x = draw(st.sampled_from([n for n in sorted(scope) if scope[n]]))
    shape = scope[x]
    variables = VARS[: len(shape)]
    idx = tuple((_offset_index(draw, v),) for v in variables)
    order = draw(st.permutations(variables)) if draw(st.booleans()) else variables
    sizes = tuple(draw(st.sampled_from([1, shape[variables.index(v)], 1 + shape[variables.index(v)] // 2]))
                  for v in order)
    agg = draw(st.sampled_from(["=", "=", "+", ">"]))
    return (Contraction(out, tuple(Affine(v) for v in order), sizes, agg, (Access(x, idx),)),
            sizes)


@st.composite
def _product(draw, scope, out):
    """Two operands: an outer product, a matmul-like contraction over one axis of each, or a
    convolution-like ``X[.., i + k, ..] * W[.., k, ..]``."""
    x = draw(st.sampled_from([n for n in sorted(scope) if 1 <= len(scope[n]) <= 3]))
    # Results of rank 4 and MAX_CELLS at most, even as outer products.
    partners = [n for n in sorted(scope) if 1 <= len(scope[n]) <= 4 - len(scope[x])
                and _cells(scope[x]) * _cells(scope[n]) <= MAX_CELLS]
    if not partners:
        return draw(_elementwise(scope, out))
    y = draw(st.sampled_from(partners))
    mode = draw(st.sampled_from(["outer", "matmul", "matmul", "conv"]))
    fresh = iter(VARS)
    x_vars = [next(fresh) for _ in scope[x]]
    y_vars = [next(fresh) for _ in scope[y]]
    x_idx = [(Affine(v),) for v in x_vars]
    out_vars = x_vars + y_vars
    sizes = dict(zip(x_vars, scope[x])) | dict(zip(y_vars, scope[y]))
    if mode != "outer":
        a = draw(st.integers(0, len(x_vars) - 1))
        b = draw(st.integers(0, len(y_vars) - 1))
        out_vars.remove(y_vars[b])
        if mode == "matmul":
            y_vars[b] = x_vars[a]
            out_vars.remove(x_vars[a])
        else:
            x_idx[a] = (Affine(x_vars[a]), Affine(y_vars[b], 1, draw(st.integers(-1, 0))))
    agg = draw(st.sampled_from(["+", "+", ">"]))
    operands = (Access(x, tuple(x_idx)), Access(y, tuple((Affine(v),) for v in y_vars)))
    out_sizes = tuple(sizes[v] for v in out_vars)
    return (Contraction(out, tuple(Affine(v) for v in out_vars), out_sizes, agg, operands),
            out_sizes)


@st.composite
def _concatenation(draw, scope, out):
    """``O[i + off, ..] = =(X[i, ..]) default D``: X written into a copy of D at an offset (a
    concatenation's half), or every other cell (stride 2)."""
    d = draw(st.sampled_from([n for n in sorted(scope) if scope[n]]))
    shape = scope[d]
    x = draw(st.sampled_from([n for n in sorted(scope) if len(scope[n]) == len(shape)]))
    variables = VARS[: len(shape)]
    out_idx = []
    for v in variables:
        kind = draw(st.sampled_from(["plain", "shift", "stride"]))
        out_idx.append(Affine(v) if kind == "plain" else
                       Affine(v, 1, draw(st.integers(1, 3))) if kind == "shift" else
                       Affine(v, 2, draw(st.integers(0, 1))))
    access = Access(x, tuple((Affine(v),) for v in variables))
    return Contraction(out, tuple(out_idx), shape, "=", (access,), default=d), shape


KINDS = {"elementwise": _elementwise, "reduction": _reduction, "slice": _slice,
         "product": _product, "concatenation": _concatenation}


@st.composite
def random_programs(draw, long_axis: bool = False):
    """A program over inputs of sizes 1-6; with ``long_axis``, an input's first axis may be
    long (257 or 300: past the CPU's split reduction and tiling thresholds, reduction.py's
    CPU_MIN_EXTENT and tiling_cpu.py's MIN_WORK), one long axis an input."""
    pool = [draw(st.integers(1, 6)) for _ in range(3)]
    long = [draw(st.sampled_from([257, 300]))] if long_axis else []
    scope: dict[str, tuple[int, ...]] = {}
    inputs = []
    for name in "ABC"[: draw(st.integers(2, 3))]:
        rank = draw(st.integers(1, 3))
        shape = tuple(draw(st.sampled_from((long if axis == 0 else []) + pool
                                           + [draw(st.integers(1, 6))]))
                      for axis in range(rank))
        inputs.append((name, shape))
        scope[name] = shape
    statements = []
    for n in range(draw(st.integers(2, 6))):
        kind = draw(st.sampled_from(sorted(KINDS)))
        statement, shape = draw(KINDS[kind](scope, f"T{n}"))
        statements.append(statement)
        scope[statement.out] = shape
    # The last result, and earlier ones at random: outputs that later statements read too.
    outputs = [s.out for s in statements[:-1] if draw(st.integers(0, 2)) == 0]
    outputs.append(statements[-1].out)
    return RandomProgram(tuple(inputs), tuple(statements), tuple(outputs),
                         draw(st.sampled_from(["float64", "float32"])),
                         draw(st.integers(0, 2**31 - 1)))


# -- the oracle ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Value:
    """An oracle tensor, whether each cell depends on the inputs at all, and whether a max/min
    upstream had a tie among cells that do (its gradient is then not defined)."""

    data: torch.Tensor
    live: np.ndarray


def _accesses(c: Contraction):
    yield c.out_idx, c.sizes
    for a in c.operands:
        yield a.idx, None


def _variable_ranges(c: Contraction, shapes) -> dict[str, range]:
    """Every index variable appears alone (``coef * v + const``) in some access: the range that
    keeps each such access in bounds holds every valid assignment."""
    bounds: dict[str, tuple[int, int]] = {}

    def narrow(term: Affine, size: int):
        lo = -(term.const // term.coef)  # ceil(-const / coef)
        hi = (size - 1 - term.const) // term.coef
        old = bounds.get(term.var, (lo, hi))
        bounds[term.var] = (max(lo, old[0]), min(hi, old[1]))

    for term, size in zip(c.out_idx, c.sizes):
        if term.var is not None:
            narrow(term, size)
    for a in c.operands:
        for index, size in zip(a.idx, shapes[a.name]):
            if len(index) == 1 and index[0].var is not None:
                narrow(index[0], size)
    for var, bound in c.constraints:
        narrow(Affine(var), bound)
    return {v: range(lo, hi + 1) for v, (lo, hi) in bounds.items()}


def _contract(c: Contraction, values: dict[str, Value]) -> tuple[Value, bool]:
    """The valid-index rule, enumerated; returns the result and whether a max/min had a tie
    among live contributions."""
    shapes = {n: tuple(v.data.shape) for n, v in values.items()}
    ranges = _variable_ranges(c, shapes)
    names = sorted(ranges)
    grid = np.meshgrid(*[np.arange(r.start, r.stop) for r in ranges.values()], indexing="ij") \
        if names else []
    env = {n: g.reshape(-1) for n, g in zip(ranges, grid)}
    count = env[names[0]].size if names else 1
    valid = np.ones(count, bool)
    positions = []
    for index, sizes in [(tuple((t,) for t in c.out_idx), c.sizes)] + \
            [(a.idx, shapes[a.name]) for a in c.operands]:
        pos = [np.broadcast_to(sum(t.eval(env) for t in e), (count,)) for e in index]
        for p, size in zip(pos, sizes):
            valid &= (p >= 0) & (p < size)
        positions.append(pos)
    for var, bound in c.constraints:
        valid &= (env[var] >= 0) & (env[var] < bound)
    out_pos, *operand_pos = [[p[valid] for p in pos] for pos in positions]
    flat = np.ravel_multi_index(out_pos, c.sizes) if c.sizes else np.zeros(int(valid.sum()), int)
    contributions, live = None, np.zeros(flat.size, bool)
    for a, pos in zip(c.operands, operand_pos):
        v = values[a.name]
        term = v.data[tuple(torch.from_numpy(p) for p in pos)] if pos else \
            v.data.reshape(1).expand(flat.size)
        live |= v.live[tuple(pos)] if pos else np.broadcast_to(v.live, (flat.size,))
        contributions = term if contributions is None else contributions * term
    n = int(np.prod(c.sizes))
    index = torch.from_numpy(flat)
    if c.default:
        d = values[c.default]
        base = d.data.reshape(-1)
        base_live = np.array(d.live.reshape(-1))
    else:
        base = torch.zeros(n, dtype=torch.float64)
        base_live = np.zeros(n, bool)
    result_live = base_live.copy()
    tie = False
    if c.agg == "=":
        data = base.index_put((index,), contributions)
        result_live[flat] = live
    elif c.agg == "+":
        data = base.index_add(0, index, contributions)
        np.logical_or.at(result_live, flat, live)
    else:
        reduce = {">": "amax", "<": "amin"}[c.agg]
        data = base.scatter_reduce(0, index, contributions, reduce, include_self=False)
        np.logical_or.at(result_live, flat, live)
        # A tie among contributions of which one depends on the inputs: the gradient's split
        # between them is a convention (PyTorch halves it), not a fusion question.
        winner = data.detach().numpy()[flat]
        got = contributions.detach().numpy()
        near = np.abs(got - winner) <= 1e-5 * np.maximum(1.0, np.abs(winner))
        tied = np.bincount(flat[near], minlength=n) > 1
        tie = bool(np.any(tied & np.bincount(flat[near & live], minlength=n).astype(bool)))
    return Value(data.reshape(c.sizes), result_live.reshape(c.sizes)), tie


def _elementwise_value(e, values: dict[str, Value]) -> Value:
    if isinstance(e, str):
        return values[e]
    if isinstance(e, float):
        return Value(torch.tensor(e, dtype=torch.float64), np.array(False))
    if len(e) == 2:
        v = _elementwise_value(e[1], values)
        return Value(UNARY[e[0]][1](v.data), v.live)
    a, b = _elementwise_value(e[1], values), _elementwise_value(e[2], values)
    return Value(BINARY[e[0]](a.data, b.data), np.logical_or(a.live, b.live))


def oracle(program: RandomProgram, arrays: list[np.ndarray]):
    """Outputs (float64 tensors on the autograd tape), the input leaves, and whether any
    max/min had a tie among live contributions."""
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    values = {name: Value(t, np.ones(t.shape, bool))
              for (name, _), t in zip(program.inputs, leaves)}
    tie = False
    for s in program.statements:
        if isinstance(s, Contraction):
            values[s.out], tied = _contract(s, values)
            tie |= tied
        else:
            values[s.out] = _elementwise_value(s.expr, values)
    return [values[o].data for o in program.outputs], leaves, tie


# -- the property --------------------------------------------------------------------------------


def assert_close(got, expected: np.ndarray, dtype: str, what: str):
    got = np.asarray(got, np.float64)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    tol = {"float64": 1e-9, "float32": 1e-4}[dtype]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * scale, err_msg=what)


def check(program: RandomProgram, device: str):
    source = program.render()
    note(source)
    last = os.environ.get("GINGHAM_FUZZ_LAST")
    if last:  # a program that hangs leaves itself behind (a hang prints no falsifying example)
        with open(last, "w") as handle:
            handle.write(f"# {device} {program!r}\n{source}\n")
    r = np.random.default_rng(program.seed)
    arrays = [r.uniform(-1.5, 1.5, shape).astype(program.dtype) for _, shape in program.inputs]
    expected, leaves, tie = oracle(program, arrays)
    function = tile.function(source)
    got = function(*arrays, device=device)
    got = got if isinstance(got, tuple) else (got,)
    for name, g, e in zip(program.outputs, got, expected):
        assert_close(g, e.detach().numpy(), program.dtype, f"output {name}\n{source}")
    if tie:
        return  # a max/min tie: its gradient is a convention, checked elsewhere
    cotangents = [r.standard_normal(tuple(e.shape)) for e in expected]
    grads = torch.autograd.grad(expected, leaves,
                                [torch.from_numpy(ct) for ct in cotangents], allow_unused=True)
    got_grads = function.vjp(arrays, [ct.astype(program.dtype) for ct in cotangents],
                             device=device)
    for (name, shape), g, e in zip(program.inputs, got_grads, grads):
        e = np.zeros(shape) if e is None else e.numpy()
        assert_close(g, e, program.dtype, f"gradient of {name}\n{source}")


def _regression(inputs, statements, outputs) -> RandomProgram:
    return RandomProgram(tuple(inputs), tuple(statements), tuple(outputs), "float64", 0)


# Found on opencl:0: a row reduction's lane loop `for (int l ...)` shadowed the statement's own
# variable `l`, and the sum read X[i, j, k, 0] (normalize.py now renames every variable).
SUM_OF_A_RANK_4_OUTER_PRODUCT = _regression(
    [("A", (4, 4))],
    [Contraction("T0", (Affine("i"), Affine("j"), Affine("k"), Affine("l")), (4, 4, 4, 4), "+",
                 (Access("A", ((Affine("i"),), (Affine("j"),))),
                  Access("A", ((Affine("k"),), (Affine("l"),))))),
     Contraction("T1", (), (), "+", (Access("T0", tuple((Affine(v),) for v in "ijkl")),))],
    ["T0", "T1"])


@SETTINGS
@given(program=random_programs())
@example(program=SUM_OF_A_RANK_4_OUTER_PRODUCT)
def test_random_program_matches_statement_by_statement_oracle(device, program):
    check(program, device)


@settings(SETTINGS, max_examples=max(1, MAX_EXAMPLES // 4))
@given(program=random_programs(long_axis=True))
def test_random_program_with_a_long_axis(device, program):
    """Long reductions and products take the split reductions and tiled kernels."""
    check(program, device)


def test_oracle_self_check():
    """The oracle on a program worked by hand: a shifted read, a keepdim max, a concatenation."""
    a = Affine
    program = RandomProgram(
        inputs=(("A", (2, 3)),),
        statements=(
            Contraction("S", (a("i"), a("j")), (2, 3), "=", (Access("A", ((a("i"),), (a("j", 1, 1),))),)),
            Contraction("M", (a("i"), a(None)), (2, 1), ">", (Access("A", ((a("i"),), (a("j"),))),)),
            Contraction("C", (a("i", 1, 1), a("j")), (2, 3), "=", (Access("S", ((a("i"),), (a("j"),))),),
                        default="A"),
        ),
        outputs=("S", "M", "C"), dtype="float64", seed=0)
    assert "C[i + 1, j : 2, 3] = =(S[i, j]) default A;" in program.render()
    x = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    (s, m, c), (leaf,), tie = oracle(program, [x])
    np.testing.assert_array_equal(s.detach(), [[-2.0, 3.0, 0.0], [5.0, -6.0, 0.0]])
    np.testing.assert_array_equal(m.detach(), [[3.0], [5.0]])
    np.testing.assert_array_equal(c.detach(), [[1.0, -2.0, 3.0], [-2.0, 3.0, 0.0]])
    (g,) = torch.autograd.grad(c.sum() + m.sum(), [leaf])
    np.testing.assert_array_equal(g, [[1.0, 2.0, 3.0], [0.0, 1.0, 0.0]])
    assert not tie


@pytest.mark.parametrize("name", ["l", "g", "acc", "rs_row", "o0"])
def test_an_index_variable_may_have_any_name(device, name):
    """A statement's variables may be named like the kernel's own loops and registers (the
    lane loop ``l``, the work-item loop ``g``, an accumulator ``acc``, an output variable
    ``o0``): 256 assignments take the row reduction on OpenCL, where ``l`` once summed one
    slice (SUM_OF_A_RANK_4_OUTER_PRODUCT)."""
    program = tile.function(f"function (X[N0, N1, N2, N3]) -> (S, M) {{\n"
                            f"    S[] = +(X[i, j, k, {name}]);\n"
                            f"    M[i : N0] = >(X[i, j, k, {name}]);\n}}")
    x = np.random.default_rng(5).uniform(-1.0, 1.0, (4, 4, 4, 4))
    s, m = program(x, device=device)
    np.testing.assert_allclose(s, x.sum(), rtol=1e-12)
    np.testing.assert_array_equal(m, x.max((1, 2, 3)))
