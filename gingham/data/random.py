"""Where shuffling's random numbers come from: the ``generator`` argument of samplers,
:func:`~gingham.data.random_split` and :class:`~gingham.data.DataLoader`.

Shuffling happens on the host, so it draws from a ``numpy.random.Generator``. A ``generator``
argument may be:

* an ``int``: a seed; a sampler makes one NumPy generator of it and keeps drawing from it, so
  successive epochs differ and a new sampler with the same seed repeats them;
* a ``numpy.random.Generator``: drawn from directly;
* a :class:`gingham.nn.functional.Generator`: each epoch draws a seed from its state and
  advances it, on the host (``get_state``/``set_state``: no kernel runs);
* ``None``: as PyTorch's default generator, the seed comes from gingham's default generator
  (that of the ``reference`` device, which lives on the host), so ``gingham.manual_seed(s)``
  makes the shuffles of a run reproducible.

    rng = host_rng(7)                            # numpy.random.Generator
"""

from __future__ import annotations

from typing import Union

import numpy as np

from ..nn import functional

GeneratorLike = Union[None, int, np.random.Generator, functional.Generator]

# Data order draws from the host-side device's default generator: the default device's would
# tie the shuffle to the dropout masks of the model (and cost a device copy per epoch).
_HOST_DEVICE = "reference"


def _draw_seed(generator: functional.Generator) -> int:
    """A 64-bit seed from ``generator``'s Philox state; the state moves on by one draw."""
    key, counter = (int(word) for word in generator.get_state())
    seed = np.random.SeedSequence([key, counter, 0x6461_7461]).generate_state(2, np.uint64)[0]
    generator.set_state(np.array([key, (counter + 1) & 0xFFFFFFFF], np.uint32))
    return int(seed)


def kept_rng(generator: GeneratorLike) -> np.random.Generator | None:
    """The NumPy generator an object keeps for its lifetime (for an int or a NumPy generator);
    ``None`` when each epoch must draw a new seed (for ``None`` or a gingham Generator)."""
    if isinstance(generator, bool) or not isinstance(
            generator, (type(None), int, np.integer, np.random.Generator, functional.Generator)):
        raise TypeError(f"generator must be an int seed, a numpy.random.Generator or a "
                        f"gingham.nn.functional.Generator, not {type(generator).__name__}")
    if isinstance(generator, (int, np.integer)):
        return np.random.default_rng(int(generator))
    if isinstance(generator, np.random.Generator):
        return generator
    return None


def host_rng(generator: GeneratorLike) -> np.random.Generator:
    """A NumPy generator to draw from now (see the module's docstring for what each kind of
    ``generator`` gives)."""
    kept = kept_rng(generator)
    if kept is not None:
        return kept
    if generator is None:
        generator = functional._default_generator(_HOST_DEVICE)
    return np.random.default_rng(_draw_seed(generator))


def draw_seed(rng: np.random.Generator) -> int:
    """A non-negative 63-bit seed (PyTorch's base seed of a loader's workers)."""
    return int(rng.integers(0, 2**63 - 1))
