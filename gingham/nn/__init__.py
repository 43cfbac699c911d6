"""Neural-network building blocks on :class:`gingham.Tensor`.

* :mod:`gingham.nn.functional` — the op library, each op a few lines of Tile, with
  ``torch.nn.functional``'s names, argument order and defaults;
* layers (:class:`Linear`, :class:`Conv1d`/``2d``/``3d``, :class:`ConvTranspose2d`,
  :class:`BatchNorm2d`, :class:`GroupNorm`, :class:`LayerNorm`, pools, :class:`Upsample`,
  activations, losses such as :class:`CrossEntropyLoss`, ...), attention
  (:class:`MultiheadAttention`, the encoder and decoder layers and stacks,
  :class:`Transformer`), containers
  (:class:`Sequential`, :class:`ModuleList`, :class:`ModuleDict`) with PyTorch's
  ``named_parameters``/``state_dict``/``load_state_dict``, and reference models
  (:mod:`gingham.nn.models`);
* :mod:`gingham.nn.hooks`, the handles of :class:`Module`'s forward and backward hooks and
  the global hooks of every module (``torch.nn.modules.module.register_module_forward_hook``,
  ``register_module_full_backward_hook``; also reachable as ``gingham.nn.modules.module``);
* :mod:`gingham.nn.init`, ``torch.nn.init``'s in-place initialisers;
* :mod:`gingham.nn.utils`, ``torch.nn.utils``: gradient clipping (eager and compiled),
  parameters as one vector, ``rnn.pad_sequence``, the ``weight_norm`` and ``spectral_norm``
  parametrizations;
* :func:`gingham.nn.training.train_step`, the compiled supervised step.

    import gingham.nn.functional as F
    y = F.relu(F.conv2d(x, w, b, stride=2, padding=1))
"""

import numpy as np

from ..frontend.tensor import Tensor
from . import (attention, functional, hooks, init, models, modules, parallel, recurrent,
               training, utils)
# The layers and attention modules are re-exported as their modules list them (one list each).
from .attention import *  # noqa: F401,F403
from .modules import *  # noqa: F401,F403  (its manual_seed is replaced below)
from .recurrent import *  # noqa: F401,F403


def manual_seed(seed: int) -> None:
    """Seed both parameter initialisation and the default dropout generator."""
    modules.manual_seed(seed)
    functional.manual_seed(seed)


def get_rng_state(device: str | None = None) -> np.ndarray:
    """Everything ``gingham.nn`` draws random numbers from, as one ``uint32`` array that
    :func:`gingham.save` stores: the state of ``device``'s default generator (dropout's; the
    first two words, :meth:`functional.Generator.get_state`) and of parameter
    initialisation's generator. ``device`` defaults to the default device, as
    ``torch.cuda.get_rng_state``'s. With the model and optimiser state, a run resumed from a
    checkpoint draws the same dropout masks as the uninterrupted run:

        gingham.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                      "rng": gingham.nn.get_rng_state("cuda:0")}, path)
        ...
        gingham.nn.set_rng_state(gingham.load(path)["rng"], "cuda:0")
    """
    generator = functional._default_generator(_device_id(device))
    return np.concatenate([generator.get_state(), modules.init_rng_state()])


def set_rng_state(new_state, device: str | None = None) -> None:
    """Restore a state :func:`get_rng_state` returned (for the same ``device``): compiled
    steps that draw from the default generator continue from it too. ``ValueError`` for an
    array of another size or type."""
    array = np.asarray(new_state.numpy() if isinstance(new_state, Tensor) else new_state)
    size = 2 + modules.INIT_STATE_WORDS
    if array.shape != (size,) or array.dtype != np.uint32:
        raise ValueError(f"set_rng_state: expected the {size} uint32 values get_rng_state() "
                         f"returns, got {array.dtype} of shape {array.shape}")
    functional._default_generator(_device_id(device)).set_state(array[:2])
    modules.set_init_rng_state(array[2:])


def _device_id(device: str | None) -> str:
    from ..devices import get_device

    return get_device(device).id


__all__ = ["attention", "functional", "hooks", "init", "models", "parallel", "recurrent",
           "training", "utils", "manual_seed", "get_rng_state", "set_rng_state",
           *(name for name in modules.__all__ if name != "manual_seed"), *attention.__all__,
           *recurrent.__all__]
