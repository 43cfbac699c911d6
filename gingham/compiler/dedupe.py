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

Renaming happens as the kernel is rendered: the renderer passes every text of the IR that holds
identifiers (buffers, registers, arrays, loop variables, comments, the schedule) through the
rename, and a name derived from a parameter (``v_T12``, ``T12_partials``) is renamed with it.
The tensors a kernel computes in registers and never stores (fused intermediates,
whose registers the lowering names ``v_<tensor>`` and ``acc_<tensor>``) get positional names
too (``gt0``, ``gt1``, ...), in the order the kernel declares them: the same batch-norm
update fused into layers 2 and 5 reads ``v_gt0`` in both, not ``v_T27`` in one and ``v_T19``
in the other (11 of the 123 distinct kernels of an fp32 ResNet-9 step for an H200 differed
only there). Renaming a copy of the IR instead cost as much as rendering it (a ResNet step
has some 40,000 nodes).

The rename is checked, not trusted: when any original name survives in the rendered source
(a field the renderer does not pass through the rename), or an original identifier already
looks like a positional name, the kernel keeps its own intermediates' names, or failing that
all its names, and is merely shared less.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from ..cache import cache_key
from ..codegen.c_family import Dialect, RenderedKernel, assemble, render_kernel
from ..devices.base import SourceUnit
from . import kernel_ir as k

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


def positional_names(kernel: k.Kernel, intermediates: bool = True) -> dict[str, str]:
    """What :func:`unit_of` renames in ``kernel``: each parameter and scratch buffer to
    ``gp<i>``, with ``intermediates`` each tensor it computes in registers to ``gt<i>``, and
    the kernel itself to a placeholder for the name made from its source::

        >>> positional_names(kernel)       # k3_Y(X, Y), with a register v_T27
        {'X': 'gp0', 'Y': 'gp1', 'T27': 'gt0', 'k3_Y': 'gh_kernel_entry'}
    """
    mapping = {p.name: f"gp{i}" for i, p in enumerate(kernel.params)}
    for scratch in kernel.scratch:
        mapping.setdefault(scratch.name, f"gp{len(mapping)}")
    if intermediates:
        for index, name in enumerate(_intermediates(kernel, mapping)):
            mapping[name] = f"gt{index}"
    mapping[kernel.name] = _PLACEHOLDER
    return mapping


class _Rename:
    """The rename of identifier texts by ``mapping`` (as whole words or ``_``-separated parts
    of a word), each distinct text once; ``clash`` is set once a text already looked like a
    positional name, which the rename could capture."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping
        self.pattern = _word_pattern(list(mapping))
        self.clash = False
        self._done: dict[str, str] = {}  # most identifiers repeat

    def __call__(self, text: str) -> str:
        new = self._done.get(text)
        if new is None:
            self.clash = self.clash or bool(_POSITIONAL.search(text))
            new = self._done[text] = self.pattern.sub(lambda m: self.mapping[m.group(0)], text)
        return new


def unit_of(kernel: k.Kernel, dialect: Dialect) -> tuple[SourceUnit, RenderedKernel]:
    """The compilable unit of ``kernel`` (entry and standalone source) and its rendering, for
    assembling it with others into one source file (:func:`~gingham.codegen.c_family.
    assemble`): the kernel with positional names, named by its hash, or ``kernel`` as it is."""
    for intermediates in (True, False):
        mapping = positional_names(kernel, intermediates)
        rename = _Rename(mapping)
        part = render_kernel(kernel, dialect, rename)
        if rename.clash:
            break  # a clash does not depend on what is renamed
        source = assemble([part], dialect)
        # String literals (CUDA's extern "C") hold no identifiers: a tensor named C is fine.
        code = _STRING_LITERAL.sub('""', source)
        if not _survives(rename, code):
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


def _survives(rename: _Rename, code: str) -> bool:
    """Whether any name that ``rename`` replaces is left in ``code``. Searched for as
    substrings first: the whole-word pattern, which begins with a look-behind, tries every
    position of the source (20 ms of a bf16 ResNet-9 step's 1.4 MB of CUDA), where most
    kernels' names do not occur at all."""
    if not any(name in code for name in rename.mapping):
        return False
    return rename.pattern.search(code) is not None


_STRING_LITERAL = re.compile(r'"[^"\n]*"')
# The placeholder not within a longer identifier: its text first and the look-behind after
# it, so that the search skips to each occurrence (a leading look-behind is tried at every
# position: 33 ms against 1 ms on a bf16 ResNet-9 step's 1.4 MB of CUDA).
_PLACEHOLDER_WORD = re.compile(
    rf"{_PLACEHOLDER}(?<![A-Za-z0-9_]{_PLACEHOLDER})(?![A-Za-z0-9_])")

__all__ = ["UNIT_OVERHEAD", "compile_weight", "positional_names", "unit_of"]
