"""ONNX's sequence and optional ops while the graph is traced: a sequence is a Python list of
values (device tensors or host constants), an optional a value or ``None``. Positions and
split sizes must be known when the graph is traced (constants, or graph inputs passed by
value), so every list's length is static and the traced program holds only its tensors.

SequenceEmpty, SequenceConstruct, SequenceAt, SequenceInsert, SequenceErase, SequenceLength,
SplitToSequence, ConcatFromSequence, SequenceMap (its body converted once per element),
Optional, OptionalHasElement, OptionalGetElement.

    # SplitToSequence(x, axis=1) -> SequenceErase(seq, 0) -> ConcatFromSequence(axis=1)
    (rest,) = gingham.onnx.load(model)(x)          # x[:, 1:]
"""

from __future__ import annotations

import numpy as np

from ..frontend import tensor as T
from .ops import HOST_INPUTS, Node, _axis, _is_host, converter

HOST_INPUTS.update({"SequenceAt": (1,), "SequenceInsert": (2,), "SequenceErase": (1,),
                    "SplitToSequence": (1,)})

# A converter returns a list of its outputs; one whose output may be a sequence (a list
# itself) returns ``[output]``.


def _sequence(node: Node, position: int = 0) -> list:
    value = node.inputs[position]
    if not isinstance(value, list):
        raise TypeError(f"ONNX {node.op_type} node {node.name!r}: input {position} must be a "
                        f"sequence, got {type(value).__name__}")
    return value


def _position(node: Node, position: int, length: int, default: int, inserting: bool) -> int:
    """The host ``position`` input as an index into a sequence of ``length`` (negative ones
    count from the end; an insertion may also go at ``length``)."""
    given = node.ints(position, "position")
    index = default if given is None else given[0]
    if not -length <= index < length + (1 if inserting else 0):
        raise IndexError(f"ONNX {node.op_type} node {node.name!r}: position {index} is outside "
                         f"a sequence of {length} value(s)")
    return index + length if index < 0 else index


@converter("SequenceEmpty")
def _sequence_empty(node: Node):
    return [[]]


@converter("SequenceConstruct")
def _sequence_construct(node: Node):
    return [list(node.inputs)]


@converter("SequenceAt")
def _sequence_at(node: Node):
    values = _sequence(node)
    return [values[_position(node, 1, len(values), 0, inserting=False)]]


@converter("SequenceInsert")
def _sequence_insert(node: Node):
    values = list(_sequence(node))
    values.insert(_position(node, 2, len(values), len(values), inserting=True),
                  node.inputs[1])
    return [values]


@converter("SequenceErase")
def _sequence_erase(node: Node):
    values = list(_sequence(node))
    del values[_position(node, 1, len(values), len(values) - 1, inserting=False)]
    return [values]


@converter("SequenceLength")
def _sequence_length(node: Node):
    return np.asarray(len(_sequence(node)), np.int64)


@converter("SplitToSequence")
def _split_to_sequence(node: Node):
    """Pieces of ``input`` along ``axis``: of the sizes ``split`` lists, of ``split`` each
    (the last one shorter), or of 1 each (dropping the axis unless ``keepdims``)."""
    x = node.inputs[0]
    axis = _axis(node.attr("axis", 0), x.ndim)
    size = x.shape[axis]
    split = node.constant(1, "split")
    lead = (slice(None),) * axis
    if split is None:
        if node.attr("keepdims", 1):
            return [[x[lead + (slice(i, i + 1),)] for i in range(size)]]
        return [[x[lead + (i,)] for i in range(size)]]
    if split.ndim == 0:
        step = int(split)
        sizes = [min(step, size - start) for start in range(0, size, step)]
    else:
        sizes = [int(s) for s in split]
    if sum(sizes) != size:
        raise ValueError(f"ONNX SplitToSequence node {node.name!r}: split sizes {sizes} do not "
                         f"add up to axis {axis}'s {size}")
    bounds = np.cumsum([0] + sizes)
    return [[x[lead + (slice(int(b), int(e)),)] for b, e in zip(bounds[:-1], bounds[1:])]]


@converter("ConcatFromSequence")
def _concat_from_sequence(node: Node):
    """The sequence's values joined along ``axis`` (a new axis there with ``new_axis``)."""
    values = _sequence(node)
    if not values:
        raise ValueError(f"ONNX ConcatFromSequence node {node.name!r}: the sequence is empty")
    new_axis = bool(node.attr("new_axis", 0))
    axis = _axis(node.attr("axis"), values[0].ndim + (1 if new_axis else 0))
    if _is_host(*values):
        return np.stack(values, axis) if new_axis else np.concatenate(values, axis)
    tensors = [node.lift(v) for v in values]
    return T.stack(tensors, axis) if new_axis else T.concat(tensors, axis)


@converter("SequenceMap")
def _sequence_map(node: Node):
    """The body graph run on each position of the sequences (a tensor input is given whole
    to every run): one output sequence per output of the body."""
    body = node.attr("body")
    sequences = [v for v in node.inputs if isinstance(v, list)]
    lengths = {len(v) for v in sequences}
    if not isinstance(node.inputs[0], list) or len(lengths) != 1:
        raise ValueError(f"ONNX SequenceMap node {node.name!r}: the first input must be a "
                         f"sequence, and every sequence of one length (got {sorted(lengths)})")
    (length,) = lengths
    runs = [node.run_subgraph(body, [v[i] if isinstance(v, list) else v for v in node.inputs])
            for i in range(length)]
    return [[run[k] for run in runs] for k in range(len(body.output))]


@converter("Optional")
def _optional(node: Node):
    return [node.input(0)]


@converter("OptionalHasElement")
def _optional_has_element(node: Node):
    return np.asarray(node.input(0) is not None)


@converter("OptionalGetElement")
def _optional_get_element(node: Node):
    value = node.input(0)
    if value is None:
        raise ValueError(f"ONNX OptionalGetElement node {node.name!r}: the optional is empty")
    return [value]
