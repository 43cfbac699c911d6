"""One runner of ``gingham bench keras``: a Keras model trained by ``model.fit`` on one Keras
backend, in a process of its own (Keras binds its backend when it is first imported).

    python -m gingham.bench.keras_worker --backend gingham --device cuda:0 --model resnet9 \
        --batch 512 --steps 10 --weights init.npz --out run.json

``--backend gingham`` imports :mod:`gingham.keras` (which installs gingham's Keras backend)
before Keras, on ``--device`` (``GINGHAM_DEVICE``); ``--backend torch`` runs Keras on PyTorch
(``KERAS_BACKEND=torch``, with PyTorch's CUDA set as every baseline's: TF32 off, cuDNN's
autotuning on; the parent hides the GPUs from a ``cpu`` run). The model is built
with seed 0; ``--weights`` is loaded when the file exists, else the initial weights are saved
there, so every runner of a comparison starts from the same weights. The data are synthetic
images and labels of the model's shape (seed 0), ``steps`` batches, channels-last.

Two epochs of ``model.fit`` (``shuffle=False``, SGD with Nesterov momentum): the first holds the
first step (trace and compile, or PyTorch's set-up), the second is timed. Each step's and each
epoch's time ends when a weight has been read back to the host (every step has then finished
on the device). Written to ``--out`` (JSON): ``epoch_seconds``, ``step_seconds`` (per epoch,
per step), ``first_loss`` (the first step's, before any update), ``losses`` (each epoch's
mean) and ``backend`` as Keras reports it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

#: The benchmark models: name -> (image shape, channels-last; default width).
SHAPES = {"resnet9": ((32, 32, 3), 64), "resnet18": ((32, 32, 3), 64),
          "story": ((100, 100, 3), 32), "digits": ((8, 8, 1), 16)}
#: Keras' own applications (``keras.applications``, untrained: ``weights=None``), of the
#: kind PlaidML's ``plaidbench keras`` timed, here on CIFAR-sized images.
APPLICATIONS = {"resnet50": "ResNet50", "vgg16": "VGG16", "densenet121": "DenseNet121",
                "mobilenet_v2": "MobileNetV2"}
SHAPES.update({name: ((32, 32, 3), 0) for name in APPLICATIONS})


def build_model(keras, name: str, classes: int = 10, width: int | None = None):
    """The Keras twin of ``gingham bench model``'s network ``name`` (same layers and widths;
    Keras' ``same`` padding, batch norm momentum 0.9 and epsilon 1e-5 as PyTorch's), or one of
    Keras' :data:`APPLICATIONS` (logits out)."""
    layers = keras.layers
    shape, default_width = SHAPES[name]
    w = width or default_width

    def conv_bn(x, channels, stride=1, relu=True, kernel=3):
        x = layers.Conv2D(channels, kernel, strides=stride, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)
        return layers.ReLU()(x) if relu else x

    def residual(x, channels):  # ResNet-9's: x + two conv-bn-relu
        return layers.Add()([x, conv_bn(conv_bn(x, channels), channels)])

    def block(x, channels, stride=1):  # the basic block of ResNet-18 and the story net
        y = conv_bn(conv_bn(x, channels, stride), channels, relu=False)
        shortcut = x
        if stride != 1 or x.shape[-1] != channels:
            shortcut = conv_bn(x, channels, stride, relu=False, kernel=1)
        return layers.ReLU()(layers.Add()([shortcut, y]))

    if name in APPLICATIONS:
        return getattr(keras.applications, APPLICATIONS[name])(
            weights=None, input_shape=shape, classes=classes, classifier_activation=None)
    inputs = keras.Input(shape)
    if name == "resnet9":
        x = conv_bn(conv_bn(inputs, w), 2 * w)
        x = residual(layers.MaxPooling2D(2)(x), 2 * w)
        x = layers.MaxPooling2D(2)(conv_bn(x, 4 * w))
        x = layers.MaxPooling2D(2)(conv_bn(x, 8 * w))
        x = layers.GlobalMaxPooling2D()(residual(x, 8 * w))
        outputs = layers.Rescaling(0.125)(layers.Dense(classes, use_bias=False)(x))
    elif name == "resnet18":
        x = conv_bn(inputs, w)
        for index, channels in enumerate((w, 2 * w, 4 * w, 8 * w)):
            x = block(block(x, channels, 1 if index == 0 else 2), channels)
        outputs = layers.Dense(classes)(layers.GlobalAveragePooling2D()(x))
    elif name == "story":
        x = conv_bn(inputs, w, stride=2)
        for _ in range(4):
            x = block(x, w)
        outputs = layers.Dense(classes)(layers.GlobalAveragePooling2D()(x))
    elif name == "digits":  # two small convs: what the tests train
        x = layers.MaxPooling2D(2)(layers.Conv2D(w, 3, padding="same", activation="relu")(inputs))
        x = layers.MaxPooling2D(2)(layers.Conv2D(2 * w, 3, padding="same", activation="relu")(x))
        outputs = layers.Dense(classes)(layers.Flatten()(x))
    else:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(SHAPES)}")
    return keras.Model(inputs, outputs, name=name)


def synthetic_data(name: str, batch: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` batches of random channels-last images and labels (seed 0)."""
    shape, _ = SHAPES[name]
    rng = np.random.default_rng(0)
    images = rng.standard_normal((steps * batch, *shape), dtype=np.float32)
    return images, rng.integers(0, 10, steps * batch).astype(np.int32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["gingham", "torch"], required=True)
    parser.add_argument("--device", default="cpu", help="gingham device id")
    parser.add_argument("--model", choices=sorted(SHAPES), required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--weights", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    if args.backend == "gingham":
        os.environ["GINGHAM_DEVICE"] = args.device
        import gingham.keras  # noqa: F401  (installs the backend: before keras)
    else:
        os.environ["KERAS_BACKEND"] = "torch"
        import torch

        from gingham.bench.baselines import configure_cuda

        if torch.cuda.is_available():
            configure_cuda(torch)  # as every baseline: TF32 off, cuDNN's autotuning on
    import keras

    if args.precision != "fp32":
        keras.mixed_precision.set_global_policy(
            {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}[args.precision])
    keras.utils.set_random_seed(0)
    model = build_model(keras, args.model)
    if os.path.exists(args.weights):
        with np.load(args.weights) as saved:
            model.set_weights([saved[f"w{i}"] for i in range(len(saved.files))])
    else:
        np.savez(args.weights, **{f"w{i}": w for i, w in enumerate(model.get_weights())})
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    images, labels = synthetic_data(args.model, args.batch, args.steps)
    probe = model.trainable_weights[0]

    class StepTimer(keras.callbacks.Callback):
        """Each step's and each epoch's wall time, each ended once a weight is back on the
        host (every step has then finished on the device)."""

        def __init__(self) -> None:
            super().__init__()
            self.epochs: list[float] = []
            self.steps: list[list[float]] = []
            self.first_loss: float | None = None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch_started = time.perf_counter()
            self.steps.append([])

        def on_train_batch_begin(self, batch, logs=None):
            self.step_started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            keras.ops.convert_to_numpy(probe.value)
            self.steps[-1].append(time.perf_counter() - self.step_started)
            if self.first_loss is None and logs and "loss" in logs:
                self.first_loss = float(logs["loss"])  # before any update: the forward's

        def on_epoch_end(self, epoch, logs=None):
            keras.ops.convert_to_numpy(probe.value)
            self.epochs.append(time.perf_counter() - self.epoch_started)

    timer = StepTimer()
    history = model.fit(images, labels, batch_size=args.batch, epochs=2, shuffle=False,
                        verbose=0, callbacks=[timer])
    record = {"backend": keras.config.backend(), "epoch_seconds": timer.epochs,
              "step_seconds": timer.steps, "first_loss": timer.first_loss,
              "losses": [float(v) for v in history.history["loss"]]}
    with open(args.out, "w") as handle:
        json.dump(record, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
