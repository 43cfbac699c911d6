"""Property tests: random Tile contractions against a brute-force enumeration of the valid-index
rule written here, random einsum-like programs against ``numpy.einsum``, and random broadcasting
chains against NumPy."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from _util import assert_close, rng, run

SETTINGS = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

VARS = ["i", "j", "k"]
SEARCH = range(-8, 9)  # every safely-bounded variable lies in here (sizes <= 5, |coef| <= 2, |offset| <= 2)


# ---------------------------------------------------------------------------------------------
# Random contractions
# ---------------------------------------------------------------------------------------------


class Affine:
    """sum(coef * var) + const."""

    def __init__(self, terms: dict[str, int], const: int, div: int = 1):
        self.terms = {v: c for v, c in terms.items() if c != 0}
        self.const = const
        self.div = div  # exact division (PlaidML's rational index): valid only when it divides

    def eval(self, env: dict[str, int]):
        """The index value, or None where an exact division does not divide."""
        num = sum(c * env[v] for v, c in self.terms.items()) + self.const
        if num % self.div:
            return None
        return num // self.div

    def __repr__(self) -> str:
        return repr(self.render())

    def single_var(self):
        return next(iter(self.terms)) if len(self.terms) == 1 and self.div == 1 else None

    def render(self) -> str:
        out = ""
        for v, c in self.terms.items():
            mag = abs(c)
            t = v if mag == 1 else f"{mag}*{v}"
            if not out:
                out = t if c > 0 else f"-{t}"
            else:
                out += f" + {t}" if c > 0 else f" - {t}"
        if self.const:
            if not out:
                out = str(self.const)
            else:
                out += f" + {self.const}" if self.const > 0 else f" - {-self.const}"
        out = out or "0"
        if self.div != 1:
            out = f"({out})/{self.div}"
        return out


@st.composite
def affine(draw, variables, allow_div=False):
    nterms = draw(st.sampled_from([0, 1, 1, 1, 1, 2]))
    chosen = draw(st.permutations(variables))[: min(nterms, len(variables))]
    terms = {v: draw(st.integers(-2, 2).filter(lambda c: c != 0)) for v in chosen}
    div = 1
    if allow_div and terms and draw(st.integers(0, 5)) == 0:
        div = draw(st.sampled_from([2, 3]))
    return Affine(terms, draw(st.integers(-2, 2)), div)


@st.composite
def contraction(draw):
    nvars = draw(st.integers(1, 3))
    variables = VARS[:nvars]
    n_ops = draw(st.integers(1, 2))
    operands = []
    for _ in range(n_ops):
        rank = draw(st.integers(1, 3))
        sizes = [draw(st.integers(1, 5)) for _ in range(rank)]
        idx = [draw(affine(variables, allow_div=True)) for _ in range(rank)]
        operands.append((sizes, idx))
    out_rank = draw(st.integers(0, 3))
    out_sizes = [draw(st.integers(1, 5)) for _ in range(out_rank)]
    out_idx = [draw(affine(variables)) for _ in range(out_rank)]

    constraints = []  # (Affine, bound)
    for _ in range(draw(st.integers(0, 2))):
        if nvars >= 2 and draw(st.booleans()):
            a, b = draw(st.permutations(variables))[:2]
            constraints.append((Affine({a: 1, b: 1}, 0), draw(st.integers(1, 5))))
        else:
            v = draw(st.sampled_from(variables))
            constraints.append((Affine({v: 1}, 0), draw(st.integers(1, 5))))

    # Every variable must appear on the right-hand side and be bounded: make sure each one
    # appears alone in an input access or in a single-variable constraint.
    def safely_bounded(v):
        for _, idx in operands:
            for e in idx:
                if e.single_var() == v:
                    return True
        return any(e.single_var() == v and e.terms[v] == 1 for e, _ in constraints)

    for v in variables:
        if not safely_bounded(v):
            constraints.append((Affine({v: 1}, 0), draw(st.integers(1, 5))))

    # Output map injective (as a linear map) -> '=' is allowed.
    mat = np.array([[e.terms.get(v, 0) for v in variables] for e in out_idx], dtype=float).reshape(out_rank, nvars)
    injective = out_rank > 0 and np.linalg.matrix_rank(mat) == nvars

    combine = "single" if n_ops == 1 else draw(st.sampled_from(["*", "+", "=="]))
    aggs = ["+", "*", ">", "<"]
    if combine == "==":
        aggs = [">", "<"]
    if injective:
        aggs = aggs + ["="]
    agg = draw(st.sampled_from(aggs))
    seed = draw(st.integers(0, 2**31 - 1))
    return dict(
        variables=variables, operands=operands, out_sizes=out_sizes, out_idx=out_idx,
        constraints=constraints, combine=combine, agg=agg, seed=seed,
    )


def render_contraction(c) -> str:
    names = ["A", "B"][: len(c["operands"])]
    header = []
    for name, (sizes, _) in zip(names, c["operands"]):
        dims = ", ".join(f"{name}{d}" for d in range(len(sizes)))
        header.append(f"{name}[{dims}]")
    accesses = [f"{name}[{', '.join(e.render() for e in idx)}]" for name, (_, idx) in zip(names, c["operands"])]
    if c["combine"] == "single":
        expr = accesses[0]
    else:
        expr = f" {c['combine']} ".join(accesses)
    if c["out_idx"]:
        lhs = f"O[{', '.join(e.render() for e in c['out_idx'])} : {', '.join(map(str, c['out_sizes']))}]"
    else:
        lhs = "O[]"
    cons = "".join(f", {e.render()} < {b}" for e, b in c["constraints"])
    return f"function ({', '.join(header)}) -> (O) {{\n    {lhs} = {c['agg']}({expr}){cons};\n}}\n"


def enumerate_valid(c, arrays):
    """The valid-index rule, enumerated: every assignment with all accesses (inputs and output)
    in bounds (and exact divisions dividing) and all constraints satisfied. Yields
    (output cell, value, [(operand, position, d value / d operand[position])])."""
    variables = c["variables"]
    for values in itertools.product(SEARCH, repeat=len(variables)):
        env = dict(zip(variables, values))
        if not all(0 <= e.eval(env) < b for e, b in c["constraints"]):
            continue
        out = tuple(e.eval(env) for e in c["out_idx"])
        if not all(o is not None and 0 <= o < s for o, s in zip(out, c["out_sizes"])):
            continue
        vals, poss = [], []
        for arr, (sizes, idx) in zip(arrays, c["operands"]):
            pos = tuple(e.eval(env) for e in idx)
            if not all(p is not None and 0 <= p < s for p, s in zip(pos, sizes)):
                break
            vals.append(arr[pos])
            poss.append(pos)
        else:
            if c["combine"] == "single":
                yield out, vals[0], [(0, poss[0], 1.0)]
            elif c["combine"] == "*":
                yield out, vals[0] * vals[1], [(0, poss[0], vals[1]), (1, poss[1], vals[0])]
            elif c["combine"] == "+":
                yield out, vals[0] + vals[1], [(0, poss[0], 1.0), (1, poss[1], 1.0)]
            else:
                yield out, bool(vals[0] == vals[1]), []


def _cells(c, arrays):
    cells: dict[tuple, list] = {}
    for out, v, partials in enumerate_valid(c, arrays):
        cells.setdefault(out, []).append((v, partials))
    return cells


def brute_force(c, arrays):
    """The contraction's result per the spec: aggregate each reached cell; unreached cells are 0."""
    is_bool = c["combine"] == "=="
    result = np.zeros(c["out_sizes"], dtype=np.bool_ if is_bool else np.float64)
    for cell, contribs in _cells(c, arrays).items():
        vals = [v for v, _ in contribs]
        agg = c["agg"]
        if agg == "+":
            result[cell] = np.sum(vals)
        elif agg == "*":
            result[cell] = np.prod(vals)
        elif agg == ">":
            result[cell] = max(vals)
        elif agg == "<":
            result[cell] = min(vals)
        else:
            assert len(vals) == 1, "generator bug: '=' with a non-injective map"
            result[cell] = vals[0]
    return result


def brute_force_vjp(c, arrays, ct):
    """The exact vector-Jacobian product of the contraction, by enumeration; None where a max/min
    cell has a tie (not differentiable)."""
    grads = [np.zeros(a.shape) for a in arrays]
    for cell, contribs in _cells(c, arrays).items():
        vals = [v for v, _ in contribs]
        agg = c["agg"]
        if agg in "+=":
            weights = [1.0] * len(vals)
        elif agg == "*":
            weights = [float(np.prod(vals[:m] + vals[m + 1 :])) for m in range(len(vals))]
        else:
            best = max(vals) if agg == ">" else min(vals)
            winners = [m for m, v in enumerate(vals) if v == best]
            if len(winners) > 1:
                return None
            weights = [1.0 if m == winners[0] else 0.0 for m in range(len(vals))]
        for w, (_, partials) in zip(weights, contribs):
            for t, pos, d in partials:
                grads[t][pos] += ct[cell] * w * d
    return grads


def make_inputs(c):
    r = rng(c["seed"])
    arrays = []
    for sizes, _ in c["operands"]:
        if c["combine"] == "==":
            arrays.append(r.integers(0, 3, size=sizes).astype(np.int32))
        else:
            arrays.append(r.uniform(-2.0, 2.0, size=sizes))
    return arrays


@SETTINGS
@given(c=contraction())
def test_random_contraction_matches_brute_force(device, c):
    src = render_contraction(c)
    note(src)
    arrays = make_inputs(c)
    expected = brute_force(c, arrays)
    got = run(src, *arrays, device=device)
    dtype = np.bool_ if c["combine"] == "==" else np.float64
    assert_close(got, expected, dtype=dtype, rtol=1e-9, atol=1e-9, err_msg=src)


@SETTINGS
@given(c=contraction().filter(lambda c: c["combine"] != "=="))
# Found by CI: the gradient is a pinned cell statement in a vectorised elementwise kernel whose
# last axis (5) is not a multiple of its vector width; it read coordinates never declared.
@example(c=dict(variables=["i", "j"], operands=[([2, 5], [Affine({}, 0),
                                                          Affine({"i": 1, "j": 2}, 0)])],
                out_sizes=[], out_idx=[], constraints=[(Affine({"i": 1}, 0), 1),
                                                       (Affine({"j": 1}, 0), 1)],
                combine="single", agg="+", seed=0))
# Found by hypothesis: the product's gradient is a cell statement over [3, 3] reading a
# [2, 1, 3] tensor; its rows started at axis -1, and `int c-1 = gl;` did not compile.
@example(c=dict(variables=["i", "j", "k"],
                operands=[([1], [Affine({"k": 1}, 0, div=2)]),
                          ([3, 3], [Affine({"i": 1}, 0), Affine({"j": 1}, 0)])],
                out_sizes=[3], out_idx=[Affine({"i": 1}, 1)],
                constraints=[(Affine({"k": 1}, 0), 1)], combine="*", agg="*", seed=0))
def test_random_contraction_gradient_matches_brute_force(device, c):
    from _util import tile_function

    src = render_contraction(c)
    note(src)
    arrays = make_inputs(c)
    ct = rng(c["seed"] + 1).standard_normal(c["out_sizes"])
    expected = brute_force_vjp(c, arrays, ct)
    if expected is None:
        return  # a tie in a max/min: not differentiable there
    grads = tile_function(src).vjp(arrays, ct, device=device)
    assert len(grads) == len(arrays)
    for g, e in zip(grads, expected):
        assert_close(g, e, dtype=np.float64, rtol=1e-8, atol=1e-9, err_msg=src)


def test_brute_force_self_check():
    # The enumerator itself, on the spec's max-pool example: O[i : 4] = >(I[2*i + j]), j < 2.
    c = dict(
        variables=["i", "j"],
        operands=[([7], [Affine({"i": 2, "j": 1}, 0)])],
        out_sizes=[4],
        out_idx=[Affine({"i": 1}, 0)],
        constraints=[(Affine({"j": 1}, 0), 2)],
        combine="single",
        agg=">",
        seed=0,
    )
    x = np.array([-5.0, -3.0, -7.0, -1.0, -2.0, -9.0, -4.0])
    np.testing.assert_array_equal(brute_force(c, [x]), [-3.0, -1.0, -2.0, -4.0])
    assert "O[i : 4] = >(A[2*i + j]), j < 2;" in render_contraction(c)


# ---------------------------------------------------------------------------------------------
# einsum-like programs
# ---------------------------------------------------------------------------------------------


@st.composite
def einsum_case(draw):
    letters = "ijkl"
    sizes = {ch: draw(st.integers(1, 4)) for ch in letters}
    n_ops = draw(st.integers(1, 2))
    ops = ["".join(draw(st.lists(st.sampled_from(letters), min_size=1, max_size=3))) for _ in range(n_ops)]
    used = sorted(set("".join(ops)))
    out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
    seed = draw(st.integers(0, 2**31 - 1))
    return sizes, ops, "".join(out), seed


@SETTINGS
@given(case=einsum_case())
def test_random_einsum(device, case):
    sizes, ops, out, seed = case
    r = rng(seed)
    arrays = [r.standard_normal([sizes[ch] for ch in op]) for op in ops]
    names = ["A", "B"][: len(ops)]
    header = ", ".join(f"{n}[{', '.join(f'{n}{d}' for d in range(len(op)))}]" for n, op in zip(names, ops))
    expr = " * ".join(f"{n}[{', '.join(op)}]" for n, op in zip(names, ops))
    lhs = f"O[{', '.join(out)} : {', '.join(str(sizes[ch]) for ch in out)}]" if out else "O[]"
    src = f"function ({header}) -> (O) {{\n    {lhs} = +({expr});\n}}\n"
    expected = np.einsum(",".join(ops) + "->" + out, *arrays)
    assert_close(run(src, *arrays, device=device), expected, dtype=np.float64, rtol=1e-9, atol=1e-9, err_msg=src)


# ---------------------------------------------------------------------------------------------
# Broadcasting chains
# ---------------------------------------------------------------------------------------------


@st.composite
def broadcast_case(draw):
    rank = draw(st.integers(0, 4))
    full = [draw(st.integers(1, 4)) for _ in range(rank)]
    shapes = []
    for _ in range(3):
        k = draw(st.integers(0, rank))
        shp = full[rank - k :]
        shp = [1 if draw(st.booleans()) else s for s in shp]
        shapes.append(shp)
    ops = [draw(st.sampled_from(["+", "-", "*"])) for _ in range(2)]
    seed = draw(st.integers(0, 2**31 - 1))
    return shapes, ops, seed


@SETTINGS
@given(case=broadcast_case())
def test_random_broadcasting(device, case):
    shapes, ops, seed = case
    r = rng(seed)
    x, y, z = (r.standard_normal(s) for s in shapes)
    src = f"function (X, Y, Z) -> (O) {{ O = max(X {ops[0]} Y, Z) {ops[1]} Z; }}"
    f = {"+": np.add, "-": np.subtract, "*": np.multiply}
    expected = f[ops[1]](np.maximum(f[ops[0]](x, y), z), z)
    assert_close(run(src, x, y, z, device=device), expected, dtype=np.float64, err_msg=src)
