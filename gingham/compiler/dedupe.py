"""Kernels named by what they compute, so that identical kernels compile once.

A ResNet's layers repeat shapes: many of a training step's kernels differ only in the names of
the tensors they read and write (``T12`` here, ``T40`` there), and in their own name. This pass
renames a kernel's parameters to positional names (``gp0``, ``gp1``, ...) and the kernel itself
to a name made from the hash of its source, so that equal kernels render to equal sources::

    >>> units = [unit_of(kernel, DIALECTS["c"])[0] for kernel in kernels]
    >>> units[3].entry == units[9].entry        # the same conv at the same shape
    True

Within a program the equal kernels then compile once; across programs (and processes) the
device's per-kernel disk cache finds them. Launch sizes stay with each launch, never with the
source: two launches of one compiled kernel may use different grids.

Renaming rewrites every identifier of the kernel IR (buffers, registers, arrays, loop
variables, comments); a name derived from a parameter (``v_T12``, ``T12_partials``) is renamed
with it. The tensors a kernel computes in registers and never stores (fused intermediates,
whose registers the lowering names ``v_<tensor>`` and ``acc_<tensor>``) get positional names
too (``gt0``, ``gt1``, ...), in the order the kernel declares them: the same batch-norm
update fused into layers 2 and 5 reads ``v_gt0`` in both, not ``v_T27`` in one and ``v_T19``
in the other (11 of the 123 distinct kernels of an fp32 ResNet-9 step for an H200 differed
only there).

The rename is checked, not trusted: when any original name survives in the rendered source
(a field this pass does not know about), or an original identifier already looks like a
positional name, the kernel keeps its own intermediates' names, or failing that all its
names, and is merely shared less.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable

from ..cache import cache_key
from ..codegen.c_family import Dialect, RenderedKernel, assemble, render_kernel
from ..devices.base import SourceUnit
from . import kernel_ir as k

#: (IR class, field) pairs that hold identifiers; every other string field is a type, an
#: operator or a helper's name and is left alone.
_IDENTIFIERS = {
    (k.Var, "name"), (k.Load, "buffer"), (k.LoadLocal, "array"), (k.Declare, "name"),
    (k.Assign, "name"), (k.Store, "buffer"), (k.StoreLocal, "array"), (k.LocalArray, "name"),
    (k.CopyLocal, "dst"), (k.CopyLocal, "src"), (k.For, "var"), (k.Param, "name"),
    (k.Scratch, "name"), (k.Comment, "text"), (k.Kernel, "schedule"),
    (k.WarpOp, "shared"), (k.WarpOp, "src"),  # (array or buffer name, index), or None
}
_PLACEHOLDER = "gh_kernel_entry"
_POSITIONAL = re.compile(r"(?<![A-Za-z0-9])(?:gp\d+|gt\d+|gh_kernel_entry)(?![A-Za-z0-9])")
#: A register holding a tensor computed in the kernel (``lower.py``: ``v_<tensor>``, and
#: ``acc_<tensor>`` for a sibling reduction's accumulator).
_REGISTER = re.compile(r"(?:v|acc)_(.+)")


def _word_pattern(names: list[str]) -> re.Pattern:
    """Matches any of ``names`` as a whole word or an ``_``-separated part of an identifier."""
    return _compiled_word_pattern(tuple(sorted(set(names), key=lambda n: (-len(n), n))))


@functools.lru_cache(maxsize=256)
def _compiled_word_pattern(names: tuple[str, ...]) -> re.Pattern:
    # Longest first, so that a name wins over a shorter name it contains.
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])")


_FIELDS: dict[type, tuple[tuple[str, bool], ...] | None] = {}
_LEAVES = (str, int, float, bool, type(None), frozenset)


def _fields(cls: type) -> tuple[tuple[str, bool], ...] | None:
    """(field name, holds an identifier) of an IR class (None: not a dataclass), once."""
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple((f.name, (cls, f.name) in _IDENTIFIERS)
                             for f in dataclasses.fields(cls)) \
            if dataclasses.is_dataclass(cls) else None
    return _FIELDS[cls]


def _rewrite(node, rename: Callable[[str], str]):
    """A copy of an IR tree with ``rename`` applied to every identifier field (subtrees
    that do not change are shared, not copied)."""
    cls = type(node)
    # The most frequent nodes first, without the generic field walk (a ResNet step has
    # some 40,000 nodes).
    if cls is k.Const or cls in _LEAVES:
        return node
    if cls is k.Var:
        name = rename(node.name)
        return node if name == node.name else k.Var(name, node.dtype)
    if cls is k.BinOp:
        a, b = _rewrite(node.a, rename), _rewrite(node.b, rename)
        return node if a is node.a and b is node.b else k.BinOp(node.op, a, b, node.dtype)
    if cls is tuple:
        items = tuple(_rewrite(item, rename) for item in node)
        return node if all(a is b for a, b in zip(items, node)) else items
    fields = _fields(cls)
    if fields is None:
        return node
    changes = {}
    for name, is_identifier in fields:
        value = getattr(node, name)
        if is_identifier and isinstance(value, tuple):  # (name, index expression)
            new = (rename(value[0]), _rewrite(value[1], rename))
        elif is_identifier:
            new = rename(value) if value is not None else None
        elif type(value) in _LEAVES:
            continue
        else:
            new = _rewrite(value, rename)
        if new is not value and new != value:
            changes[name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _intermediates(kernel: k.Kernel, known: dict[str, str]) -> list[str]:
    """The tensors ``kernel`` holds in registers that are not among ``known`` (its
    parameters), in the order it declares them. Only statements are walked: a register is
    declared before it is used, and expressions are most of a kernel's nodes."""
    found: dict[str, None] = {}
    pending: list = [kernel.body]
    while pending:
        stmt = pending.pop()
        cls = type(stmt)
        if cls is k.Block:
            pending.extend(reversed(stmt.stmts))
        elif cls is k.For:
            pending.append(stmt.body)
        elif cls is k.If:
            if stmt.otherwise is not None:
                pending.append(stmt.otherwise)
            pending.append(stmt.then)
        elif cls is k.Declare:
            match = _REGISTER.fullmatch(stmt.name)
            if match and match.group(1) not in known:
                found.setdefault(match.group(1))
    return list(found)


def canonical(kernel: k.Kernel, intermediates: bool = True) -> k.Kernel | None:
    """``kernel`` with positional parameter names (and, with ``intermediates``, positional
    names for the tensors it computes in registers) and a placeholder name, or None when the
    rename cannot be proven complete (see the module docstring)."""
    return _canonical(kernel, intermediates)[0]


def _canonical(kernel: k.Kernel, intermediates: bool) -> tuple[k.Kernel | None, list[str]]:
    """:func:`canonical`'s kernel, and the original names it renamed."""
    mapping = {p.name: f"gp{i}" for i, p in enumerate(kernel.params)}
    for scratch in kernel.scratch:
        mapping.setdefault(scratch.name, f"gp{len(mapping)}")
    if intermediates:
        for index, name in enumerate(_intermediates(kernel, mapping)):
            mapping[name] = f"gt{index}"
    mapping[kernel.name] = _PLACEHOLDER
    pattern = _word_pattern(list(mapping))
    renamed_text: dict[str, str] = {}  # most identifiers repeat: rename each text once
    clash = False

    def rename(text: str) -> str:
        nonlocal clash
        new = renamed_text.get(text)
        if new is None:
            # An identifier that already looks like a new name could be captured by one.
            clash = clash or bool(_POSITIONAL.search(text))
            new = renamed_text[text] = pattern.sub(lambda m: mapping[m.group(0)], text)
        return new

    renamed = _rewrite(kernel, rename)
    if clash or _POSITIONAL.search(kernel.name):
        return None, []
    return dataclasses.replace(renamed, name=_PLACEHOLDER), list(mapping)


def unit_of(kernel: k.Kernel, dialect: Dialect) -> tuple[SourceUnit, RenderedKernel]:
    """The compilable unit of ``kernel`` (entry and standalone source) and its rendering, for
    assembling it with others into one source file (:func:`~gingham.codegen.c_family.
    assemble`): the canonical kernel named by its hash, or ``kernel`` itself as it is."""
    for intermediates in (True, False):
        renamed, originals = _canonical(kernel, intermediates)
        if renamed is None:
            continue
        part = render_kernel(renamed, dialect)
        source = assemble([part], dialect)
        # String literals (CUDA's extern "C") hold no identifiers: a tensor named C is fine.
        code = _STRING_LITERAL.sub('""', source)
        if not _word_pattern(originals).search(code):
            entry = f"gk_{cache_key(dialect.name, source)[:20]}"
            part = dataclasses.replace(part, code=_PLACEHOLDER_WORD.sub(entry, part.code))
            source = _PLACEHOLDER_WORD.sub(entry, source)
            return SourceUnit(entry, source, compile_weight(kernel, source)), part
    part = render_kernel(kernel, dialect)
    source = assemble([part], dialect)
    return SourceUnit(kernel.name, source, compile_weight(kernel, source)), part


#: What a kernel costs to build beside its code, in characters of plain code: each kernel in
#: a piece goes through the compiler's per-function work however small it is. NVRTC, fp32
#: and bf16 ResNet-9 steps' 264 kernels one at a time (2-core EPYC): 23 ms + 1.5 us per
#: character of :func:`compile_weight`'s unrolled code; in one piece 32 of the small kernels
#: (102 K characters) took 399 ms where one of the tiled products (124 K) took 196 ms, about
#: 8 ms each beyond their code. Weighed by their code alone the small kernels came out so
#: light that one compile piece took 16-25 of them: 0.6-0.8 s, the last to finish in the fp32
#: step's compile on the H200 (docs/measurements.md, stop 29).
UNIT_OVERHEAD = 5_000


def compile_weight(kernel: k.Kernel, source: str) -> float:
    """A guess at what building ``source`` costs, in characters of plain code: its length
    times how much its unrolled loops multiply its statements, plus :data:`UNIT_OVERHEAD`.
    A tensor-core kernel written as ``unroll`` loops is ~19 KB of CUDA but NVRTC takes 1-2 s
    on it (a few times its length in elementwise kernels, ~0.2 s each); weighed by length
    alone two of them shared a compile piece (1.8 s, the longest of ResNet-9's bf16 step on
    the H200)."""
    rolled = k.statements(kernel.body)
    return len(source) * k.statements(kernel.body, unrolled=True) / max(rolled, 1) + \
        UNIT_OVERHEAD


_STRING_LITERAL = re.compile(r'"[^"\n]*"')
_PLACEHOLDER_WORD = re.compile(rf"(?<![A-Za-z0-9_]){_PLACEHOLDER}(?![A-Za-z0-9_])")

__all__ = ["UNIT_OVERHEAD", "canonical", "compile_weight", "unit_of"]
