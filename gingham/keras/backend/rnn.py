"""Keras' recurrent loop on gingham tensors. :func:`rnn` runs the cell's step function once
per time step in Python; inside a compiled step (:func:`gingham.jit`) the loop traces into
the one program, unrolled, which suits short sequences (its size grows with their length).

``lstm`` and ``gru`` (the fused kernels Keras tries first) are not implemented: they raise
``NotImplementedError``, on which Keras' LSTM and GRU layers run their cells through
:func:`rnn`, so both layers work.

    outputs = keras.layers.LSTM(16, return_sequences=True)(keras.ops.ones((4, 10, 8)))
"""

from __future__ import annotations

from keras.src import tree

from ...frontend import tensor as gt
from ...frontend.tensor import Tensor
from ._unsupported import unsupported, unsupported_module_getattr
from .core import cast, convert_to_tensor

lstm = unsupported("rnn.lstm")
gru = unsupported("rnn.gru")
bidirectional_lstm = unsupported("rnn.bidirectional_lstm")
bidirectional_gru = unsupported("rnn.bidirectional_gru")


def cudnn_ok(*args, **kwargs) -> bool:
    return False  # Keras then takes its generic path, through rnn() below


def _select(keep: Tensor, new: Tensor, old: Tensor) -> Tensor:
    """``new`` where the step's mask ``keep`` ([batch, 1]) is True, else ``old``."""
    keep = keep.reshape(keep.shape + (1,) * (new.ndim - keep.ndim))
    return gt.where(keep, new, old)


def rnn(step_function, inputs, initial_states, go_backwards=False, mask=None, constants=None,
        unroll=False, input_length=None, time_major=False, zero_output_for_mask=False,
        return_all_outputs=True):
    """``(last_output, outputs, states)`` of ``step_function(input_t, states + constants)``
    applied along the time axis (1, or 0 when ``time_major``), as Keras' other backends: a
    masked step (``mask`` False, ``[batch, time]``) keeps the states and repeats the previous
    output (zeros with ``zero_output_for_mask``); ``go_backwards`` runs from the end and
    gives the outputs in the order computed. ``unroll`` changes nothing: the loop is always
    unrolled into the traced program."""
    axis = 0 if time_major else 1
    flat_inputs = [convert_to_tensor(x) for x in tree.flatten(inputs)]
    steps = flat_inputs[0].shape[axis]
    if not steps:
        raise ValueError("rnn: the inputs have no time steps")
    sliced = [x.unbind(axis) for x in flat_inputs]
    masks = None
    if mask is not None:
        mask = cast(mask, "bool")
        masks = (mask.unsqueeze(-1) if mask.ndim == 2 else mask).unbind(axis)
    constants = tuple(constants or ())
    states = tuple(initial_states)
    outputs: list[Tensor] = []
    previous = None
    for t in (range(steps - 1, -1, -1) if go_backwards else range(steps)):
        step_input = tree.pack_sequence_as(inputs, [x[t] for x in sliced])
        output, new_states = step_function(step_input, states + constants)
        if masks is not None:
            if previous is None or zero_output_for_mask:
                previous = gt.zeros(output.shape, output.dtype, output.device)
            output = _select(masks[t], output, previous)
            kept = [_select(masks[t], new, old) for new, old
                    in zip(tree.flatten(new_states), tree.flatten(states))]
            new_states = tree.pack_sequence_as(new_states, kept)
        states = tuple(new_states)
        outputs = outputs + [output] if return_all_outputs else [output]
        previous = output
    return outputs[-1], gt.stack(outputs, axis), states


__getattr__ = unsupported_module_getattr(__name__, "rnn")
