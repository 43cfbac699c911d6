"""``model.fit`` / ``evaluate`` / ``predict`` for gingham: every step compiled whole.

The training step is the PyTorch backend's (forward, ``loss.backward()``, the optimiser's
``apply``, the metrics' updates), run under :func:`gingham.jit`: the first batch of a shape
traces it into one Tile program (forward, gradient program, the updates of the weights, the
optimiser's slots, BatchNormalization's statistics and the metrics' totals as its outputs),
and every later batch of that shape replays the compiled program. A last partial batch of
another size traces once more (``batch_size`` dividing the data avoids it); the test and
predict steps are compiled the same way.

    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, batch_size=64, epochs=3, validation_data=(xv, yv))
    model.train_function.traces        # 1 (2 with a last partial batch)
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from keras.src import backend
from keras.src import callbacks as callbacks_module
from keras.src import optimizers as optimizers_module
from keras.src import tree
from keras.src.backend import config
from keras.src.trainers import trainer as base_trainer
from keras.src.trainers.data_adapters import array_slicing
from keras.src.trainers.data_adapters import data_adapter_utils
from keras.src.trainers.epoch_iterator import EpochIterator
from keras.src.utils import traceback_utils
from keras.src.utils.python_utils import pythonify_logs

from ...frontend.jit import jit
from ...frontend.tensor import Tensor, no_grad
from .core import convert_to_tensor, current_device, leaf_of, update_scope


def _batch_array(value):
    """A batch's leaf as the compiled step takes it: NumPy, floats in Keras' floatx (as the
    data adapters give them)."""
    if value is None or isinstance(value, Tensor):
        return value
    array = np.asarray(backend.convert_to_numpy(value))
    if array.dtype.kind == "f" and array.dtype != np.dtype(backend.floatx()):
        array = array.astype(backend.floatx())
    return array


class _Structures:
    """The nesting of a step's data and results, per structure key. Slots only: gingham.jit
    checks the Python state a traced function can see on every call (to retrace when it
    changes), and this bookkeeping is not the step's state."""

    __slots__ = ("inputs", "outputs")

    def __init__(self) -> None:
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}


def _sample_weight_copied(data):
    """``data`` (a batch, ``(x, y, sample_weight)`` when weighted) with its sample weights
    copied. Keras' losses multiply a mask into them in place (``sample_weight *= mask``),
    harmless on the fresh tensors its other backends' data adapters give, but gingham.jit
    refuses in-place changes of its arguments. Only the weights: a copy of ``x`` costs the
    step a kernel (measured on the cpu device: 21 kernels for a Dense model's step instead of
    20)."""
    if not (isinstance(data, tuple) and len(data) == 3 and data[2] is not None):
        return data
    weights = tree.map_structure(lambda w: w if w is None else w.clone(), data[2])
    return data[0], data[1], weights


class CompiledStep:
    """``step(data)`` traced by :func:`gingham.jit` once per structure and shapes of
    ``data``, replayed afterwards; returns the step's results with their structure. Called
    as Keras' loops call a train function: with a list of one batch.

    ``traces`` counts the traces (one per batch shape, in the steady state none)."""

    def __init__(self, step: Callable[[Any], Any], device: str, grad: bool) -> None:
        shapes = _Structures()

        def traced(key, *leaves):
            data = _sample_weight_copied(tree.pack_sequence_as(shapes.inputs[key],
                                                               list(leaves)))
            with update_scope():
                if grad:
                    result = step(data)
                else:
                    with no_grad():
                        result = step(data)
            shapes.outputs[key] = tree.map_structure(lambda _: None, result)
            flat = [convert_to_tensor(v) for v in tree.flatten(result)]
            # A result that is a leaf (an input returned as it is) must be computed by the
            # program to be one of its outputs.
            return tuple(v.clone() if v.is_leaf else v for v in flat)

        self._shapes = shapes
        self._compiled = jit(traced, device=device)

    @property
    def traces(self) -> int:
        return self._compiled.traces

    def __call__(self, batches):
        data = batches[0]
        leaves = [_batch_array(v) for v in tree.flatten(data)]
        key = repr(tree.map_structure(lambda v: None if v is None else 0, data))
        if key not in self._shapes.inputs:
            self._shapes.inputs[key] = tree.map_structure(lambda _: None, data)
        outputs = self._compiled(key, *leaves)
        return tree.pack_sequence_as(self._shapes.outputs[key], list(outputs))


class GinghamTrainer(base_trainer.Trainer):
    """Keras' trainer for gingham (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.train_function = None
        self.test_function = None
        self.predict_function = None

    # -- steps (traced) ---------------------------------------------------------------------------

    def train_step(self, data):
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        if self._call_has_training_arg:
            y_pred = self(x, training=True)
        else:
            y_pred = self(x)
        trainable = self.trainable_weights[:]
        leaves = [leaf_of(v) for v in trainable]
        for leaf in leaves:
            leaf.grad = None
        loss = self._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                  training=True)
        self._loss_tracker.update_state(
            loss, sample_weight=next(i for i in tree.flatten(x) if i is not None).shape[0])
        if self.optimizer is not None:
            loss = self.optimizer.scale_loss(loss)
        if trainable:
            loss.backward()  # gradients join the step's graph (lazy tensors)
            gradients = [leaf.grad for leaf in leaves]
            with no_grad():
                self.optimizer.apply(gradients, trainable)
            for leaf in leaves:
                leaf.grad = None
        else:
            warnings.warn("The model does not have any trainable weights.")
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def test_step(self, data):
        x, y, sample_weight = data_adapter_utils.unpack_x_y_sample_weight(data)
        if self._call_has_training_arg:
            y_pred = self(x, training=False)
        else:
            y_pred = self(x)
        loss = self._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                  training=False)
        self._loss_tracker.update_state(
            loss, sample_weight=next(i for i in tree.flatten(x) if i is not None).shape[0])
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def predict_step(self, data):
        x, _, _ = data_adapter_utils.unpack_x_y_sample_weight(data)
        if self._call_has_training_arg:
            return self(x, training=False)
        return self(x)

    # -- compiled functions ---------------------------------------------------------------------

    def _step_device(self) -> str:
        variables = self.variables
        return leaf_of(variables[0]).device if variables else current_device()

    def _check_steps_per_execution(self) -> None:
        if self.steps_per_execution > 1:
            raise NotImplementedError(
                "steps_per_execution > 1 is not implemented by gingham's Keras backend yet; "
                f"got steps_per_execution={self.steps_per_execution}")

    def _compiled_function(self, name: str, step: Callable, grad: bool, force: bool):
        """``self.<name>``: ``step`` compiled (:class:`CompiledStep`), made once unless
        ``force``."""
        if getattr(self, name) is not None and not force:
            return getattr(self, name)
        self._check_steps_per_execution()
        setattr(self, name, CompiledStep(step, self._step_device(), grad=grad))
        return getattr(self, name)

    def make_train_function(self, force=False):
        return self._compiled_function("train_function", self.train_step, True, force)

    def make_test_function(self, force=False):
        return self._compiled_function("test_function", self.test_step, False, force)

    def make_predict_function(self, force=False):
        return self._compiled_function("predict_function", self.predict_step, False, force)

    # -- loops (the PyTorch backend's, without its module modes) --------------------------------

    @traceback_utils.filter_traceback
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1):
        self._assert_compile_called("fit")
        max_epochs = config.max_epochs()
        if max_epochs and max_epochs < epochs:
            warnings.warn("Limiting epochs to %d" % max_epochs)
            epochs = max_epochs
        self._eval_epoch_iterator = None
        if validation_split and validation_data is None:
            (x, y, sample_weight), validation_data = array_slicing.train_validation_split(
                (x, y, sample_weight), validation_split=validation_split)
        if validation_data is not None:
            val_x, val_y, val_sample_weight = data_adapter_utils.unpack_x_y_sample_weight(
                validation_data)
        epoch_iterator = EpochIterator(
            x=x, y=y, sample_weight=sample_weight, batch_size=batch_size,
            steps_per_epoch=steps_per_epoch, shuffle=shuffle, class_weight=class_weight,
            steps_per_execution=self.steps_per_execution)
        self._symbolic_build(iterator=epoch_iterator)
        epoch_iterator.reset()
        if not isinstance(callbacks, callbacks_module.CallbackList):
            callbacks = callbacks_module.CallbackList(
                callbacks, add_history=True, add_progbar=verbose != 0, verbose=verbose,
                epochs=epochs, steps=epoch_iterator.num_batches, model=self)
        self.stop_training = False
        training_logs = {}
        self.make_train_function()
        callbacks.on_train_begin()
        initial_epoch = self._initial_epoch or initial_epoch
        logs = {}
        for epoch in range(initial_epoch, epochs):
            self.reset_metrics()
            callbacks.on_epoch_begin(epoch)
            logs = {}
            for begin_step, end_step, data in epoch_iterator:
                callbacks.on_train_batch_begin(begin_step)
                logs = self.train_function(data)
                callbacks.on_train_batch_end(end_step, logs)
                if self.stop_training:
                    break
            epoch_logs = pythonify_logs(self._get_metrics_result_or_logs(logs))
            if validation_data is not None and self._should_eval(epoch, validation_freq):
                if getattr(self, "_eval_epoch_iterator", None) is None:
                    self._eval_epoch_iterator = EpochIterator(
                        x=val_x, y=val_y, sample_weight=val_sample_weight,
                        batch_size=validation_batch_size or batch_size,
                        steps_per_execution=self.steps_per_execution,
                        steps_per_epoch=validation_steps, shuffle=False)
                val_logs = self.evaluate(
                    x=val_x, y=val_y, sample_weight=val_sample_weight,
                    batch_size=validation_batch_size or batch_size, steps=validation_steps,
                    callbacks=callbacks, return_dict=True, _use_cached_eval_dataset=True)
                epoch_logs.update({f"val_{name}": val for name, val in val_logs.items()})
            callbacks.on_epoch_end(epoch, epoch_logs)
            training_logs = epoch_logs
            if self.stop_training:
                break
        if isinstance(self.optimizer, optimizers_module.Optimizer) and epochs > 0:
            self.optimizer.finalize_variable_values(self.trainable_weights)
        if getattr(self, "_eval_epoch_iterator", None) is not None:
            del self._eval_epoch_iterator
        callbacks.on_train_end(logs=training_logs)
        return self.history

    @traceback_utils.filter_traceback
    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict=False, **kwargs):
        use_cached_eval_dataset = kwargs.pop("_use_cached_eval_dataset", False)
        if kwargs:
            raise ValueError(f"Arguments not recognized: {kwargs}")
        if use_cached_eval_dataset:
            epoch_iterator = self._eval_epoch_iterator
        else:
            epoch_iterator = EpochIterator(
                x=x, y=y, sample_weight=sample_weight, batch_size=batch_size,
                steps_per_epoch=steps, shuffle=False,
                steps_per_execution=self.steps_per_execution)
        self._symbolic_build(iterator=epoch_iterator)
        epoch_iterator.reset()
        if not isinstance(callbacks, callbacks_module.CallbackList):
            callbacks = callbacks_module.CallbackList(
                callbacks, add_progbar=verbose != 0, verbose=verbose, epochs=1,
                steps=epoch_iterator.num_batches, model=self)
        self.make_test_function()
        self.stop_evaluating = False
        callbacks.on_test_begin()
        logs = {}
        self.reset_metrics()
        for begin_step, end_step, data in epoch_iterator:
            callbacks.on_test_batch_begin(begin_step)
            logs = self.test_function(data)
            callbacks.on_test_batch_end(end_step, logs)
            if self.stop_evaluating:
                break
        logs = pythonify_logs(self._get_metrics_result_or_logs(logs))
        callbacks.on_test_end(logs)
        if return_dict:
            return logs
        return self._flatten_metrics_in_order(logs)

    @traceback_utils.filter_traceback
    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        epoch_iterator = EpochIterator(
            x=x, batch_size=batch_size, steps_per_epoch=steps, shuffle=False,
            steps_per_execution=self.steps_per_execution)
        if not isinstance(callbacks, callbacks_module.CallbackList):
            callbacks = callbacks_module.CallbackList(
                callbacks, add_progbar=verbose != 0, verbose=verbose, epochs=1,
                steps=epoch_iterator.num_batches, model=self)
        self.make_predict_function()
        self.stop_predicting = False
        callbacks.on_predict_begin()
        outputs = None
        batch_outputs = None
        for begin_step, end_step, data in epoch_iterator:
            callbacks.on_predict_batch_begin(begin_step)
            batch_outputs = tree.map_structure(backend.convert_to_numpy,
                                               self.predict_function(data))
            if outputs is None:
                outputs = tree.map_structure(lambda output: [output], batch_outputs)
            else:
                tree.map_structure_up_to(batch_outputs, lambda out, b: out.append(b),
                                         outputs, batch_outputs)
            callbacks.on_predict_batch_end(end_step, {"outputs": batch_outputs})
            if self.stop_predicting:
                break
        callbacks.on_predict_end()
        return tree.map_structure_up_to(batch_outputs, np.concatenate, outputs)

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        self._assert_compile_called("train_on_batch")
        if class_weight is not None:
            if sample_weight is not None:
                raise ValueError("Arguments `sample_weight` and `class_weight` cannot be "
                                 f"specified at the same time. Received: "
                                 f"sample_weight={sample_weight}, class_weight={class_weight}")
            sample_weight = data_adapter_utils.class_weight_to_sample_weights(y, class_weight)
        data = (x, y, sample_weight)
        self._symbolic_build(data_batch=data)
        self.make_train_function()
        self.reset_metrics()
        logs = pythonify_logs(self.train_function([data]))
        if return_dict:
            return logs
        return self._flatten_metrics_in_order(logs)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        self._assert_compile_called("test_on_batch")
        data = (x, y, sample_weight)
        self._symbolic_build(data_batch=data)
        self.make_test_function()
        self.reset_metrics()
        logs = pythonify_logs(self.test_function([data]))
        if return_dict:
            return logs
        return self._flatten_metrics_in_order(logs)

    def predict_on_batch(self, x):
        self.make_predict_function()
        outputs = self.predict_function([(x,)])
        return tree.map_structure(backend.convert_to_numpy, outputs)


NumpyTrainer = GinghamTrainer  # the name keras.src.models.model imports from this slot
