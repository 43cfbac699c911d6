"""Train a Keras 3 convnet on the 8x8 digits that ship with gingham, with gingham as Keras'
backend: the Keras code is unchanged, only ``import gingham.keras`` comes first.

    python examples/keras_mnist_like.py [--device cpu|opencl:0|cuda:0] [--epochs 5]
"""

from __future__ import annotations

import argparse
import time

import gingham.keras  # before keras: makes gingham Keras' backend

import keras  # noqa: E402  (after gingham.keras)
import numpy as np  # noqa: E402

from gingham import data  # noqa: E402


def build_model() -> keras.Model:
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        # momentum 0.9: the moving statistics settle within the few hundred steps of this demo
        keras.layers.BatchNormalization(momentum=0.9),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dropout(0.1),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="gingham device id (default: the best)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    if args.device:
        gingham.keras.set_device(args.device)

    train_images, train_labels = data.load_digits("train")
    test_images, test_labels = data.load_digits("test")
    # gingham's loader gives NCHW; Keras' default layout is channels_last.
    x_train = np.transpose(train_images, (0, 2, 3, 1))
    x_test = np.transpose(test_images, (0, 2, 3, 1))

    print(f"keras {keras.__version__}, backend {keras.config.backend()!r}, "
          f"device {gingham.keras.current_device()}")
    model = build_model()
    started = time.perf_counter()
    history = model.fit(x_train, train_labels, batch_size=args.batch, epochs=args.epochs,
                        validation_data=(x_test, test_labels), verbose=2)
    print(f"trained in {time.perf_counter() - started:.1f} s; the training step was traced "
          f"{model.train_function.traces} time(s) (a last partial batch is another shape)")
    loss, accuracy = model.evaluate(x_test, test_labels, batch_size=256, verbose=0)
    print(f"test loss {loss:.3f}, accuracy {accuracy:.3f} "
          f"(last epoch: {history.history['val_accuracy'][-1]:.3f})")


if __name__ == "__main__":
    main()
