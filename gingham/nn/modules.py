"""Layers in PyTorch's shape: :class:`Module`, the containers (:class:`Sequential`,
:class:`ModuleList`, :class:`ModuleDict`) and the layers (``Linear``, ``Conv2d``, ``LayerNorm``,
``Embedding``, activations, pools, ...), over :mod:`gingham.nn.functional`.

    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    logits = model(images)
    opt = gingham.optim.SGD(model.parameters(), lr=0.1)
    gingham.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, "run.ckpt")

A module finds what it holds by walking its attributes, in the order they were set; there is
nothing to register (PyTorch's ``register_buffer``, ``register_parameter`` and ``add_module``
work too, and say what an attribute is where the rules below would guess otherwise):

* a :class:`Module` attribute is a child, named by the attribute; a list or tuple attribute's
  modules are children named ``attr.0``, ``attr.1``, ... (PyTorch's ``ModuleList`` naming);
  :class:`Sequential` and :class:`ModuleList` name theirs ``0``, ``1``, ...,
  :class:`ModuleDict` by key. Plain dicts are not walked: use a ``ModuleDict``.
* an :class:`nn.Parameter` attribute (the layers' weights are) is a *parameter* whatever
  its ``requires_grad``, so one frozen with ``p.requires_grad = False`` stays one, as in
  PyTorch; another public :class:`gingham.Tensor` attribute is a parameter while it requires
  gradients and a *buffer* otherwise (batch norm's running statistics; such a tensor frozen
  by ``module.requires_grad_(False)`` is registered and stays a parameter). Both are in
  :meth:`Module.state_dict` under PyTorch's dotted names, so a PyTorch state dict of the
  same architecture loads unchanged.
  Attributes whose names start with ``_`` are private: neither, and not saved (``to()`` still
  moves them). ``register_buffer(name, t, persistent=False)`` makes a buffer that is not
  saved; a registered name is a buffer or parameter whatever its ``requires_grad`` and
  spelling.

Calling a module runs its forward hooks around ``forward`` as PyTorch's
(``register_forward_pre_hook``, ``register_forward_hook``, the global ones of
:mod:`gingham.nn.hooks`) and sets up its backward hooks (``register_full_backward_hook``,
``register_full_backward_pre_hook``); without hooks, a call is just ``forward``.

Parameters are leaf tensors; buffers are leaf tensors updated by ``assign`` — inside
``gingham.jit`` those updates become outputs of the compiled step. Loading a state dict assigns
new values to the same tensor objects, and ``to()`` (``cpu()``, ``half()``, ...) moves them in
place, so optimisers and compiled steps holding them see the loaded or moved values.
Initialisation follows PyTorch's defaults (Kaiming-uniform with a = sqrt(5) for linear and
convolution layers, N(0, 1) for embeddings), drawn from :func:`manual_seed`'s generator.

The convolutions and pools also take PyTorch's unbatched input (``[C, H, W]`` for the 2-d
layers), as PyTorch's do; the batch norms, as PyTorch's, need a batch.

The image layers take ``data_format="NHWC"`` for channels-last data (what PyTorch's
``memory_format=torch.channels_last`` and Keras use); their parameters keep PyTorch's shapes
(OIHW filters), so weights move between the layouts and to and from PyTorch unchanged.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from ..errors import StateDictError
from ..frontend.defaults import default_float
from ..frontend.dims import ShapeError, _memory_format
from ..frontend.strides import relaid
from ..frontend.tensor import (Tensor, _check_differentiable, assign_all, cat, move_all,
                               no_grad, placement, realize, refuse_while_tracing, tensor, zeros)
from ..tile import dtypes as dt
from ..torch_devices import cuda_id
from . import functional as F
from . import hooks as _hooks
from .hooks import RemovableHandle, add_hook, call_with_hooks, has_hooks, hook_ids


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _dtype_name(dtype: np.dtype) -> str:
    try:
        return dt.dtype_name(dtype)
    except KeyError:
        return str(dtype)


def _add_indent(text: str, spaces: int) -> str:
    """Every line of ``text`` but the first indented (how PyTorch nests a child's repr)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * spaces + line for line in rest])


class Parameter(Tensor):
    """A tensor that is a module's parameter, as ``torch.nn.Parameter``: a leaf holding
    ``data``'s value (sharing it, as PyTorch's shares the storage), requiring gradients unless
    ``requires_grad=False``; a module attribute holding one is a parameter whatever its
    ``requires_grad``.

        class Scale(nn.Module):
            def __init__(self, n):
                self.gain = nn.Parameter(gingham.ones(n))

            def forward(self, x):
                return x * self.gain
    """

    def __init__(self, data: Tensor | np.ndarray | None = None, requires_grad: bool = True
                 ) -> None:
        if data is None:
            data = tensor(np.zeros(0, np.float32))
        elif not isinstance(data, Tensor):
            data = tensor(np.asarray(data))
        data.realize()
        if requires_grad:
            _check_differentiable("Parameter", data)
        super().__init__(data.shape, data.dtype, data.device, buffer=data._buffer,
                         requires_grad=requires_grad)
        self._layout = data._layout  # PyTorch's Parameter shares its data's memory and layout

    def __deepcopy__(self, memo: dict) -> "Parameter":
        copied = Parameter(Tensor.__deepcopy__(self, memo), self.requires_grad)
        memo[id(self)] = copied
        return copied

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class TensorListing(list):
    """What ``parameters()`` and ``buffers()`` return: a list (gingham's code and users index
    it and take its ``len``) that is also an iterator over itself, as PyTorch's generators
    are used: ``device = next(model.parameters()).device``."""

    _position = 0

    def __next__(self) -> Tensor:
        if self._position >= len(self):
            raise StopIteration
        self._position += 1
        return self[self._position - 1]


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(..., strict=False)`` passed over: the module's names that the
    state dict lacked, and the state dict's names that the module does not have."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """A callable holding parameters, buffers and sub-modules, found through its attributes
    (see the module docstring). Subclasses set attributes in ``__init__`` (no
    ``super().__init__()`` is needed) and define ``forward``:

        class MLP(nn.Module):
            def __init__(self):
                self.hidden = nn.Linear(4, 8)
                self.out = nn.Linear(8, 2)

            def forward(self, x):
                return self.out(F.relu(self.hidden(x)))

        [name for name, _ in MLP().named_parameters()]
        # ['hidden.weight', 'hidden.bias', 'out.weight', 'out.bias']
    """

    training = True
    # Buffers a state dict may lack when loading: a missing one keeps its value (batch
    # norm's num_batches_tracked, absent from checkpoints gingham wrote before it kept one;
    # PyTorch's batch norm accepts such old state dicts the same way).
    _optional_state: tuple[str, ...] = ()

    # Names given to register_parameter / register_buffer (or kept a parameter by
    # requires_grad_): they override the requires_grad rule and the "_" privacy rule, as the
    # registration says what the tensor is. Frozensets, so the class's empty default is shared
    # safely and a registration makes the instance its own.
    _registered_parameters: frozenset[str] = frozenset()
    _registered_buffers: frozenset[str] = frozenset()
    _non_persistent_buffers_set: frozenset[str] = frozenset()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def __call__(self, *args, **kwargs):
        # gingham.jit traces modules many times: without hooks, a call is just forward.
        if has_hooks(self):
            return call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # -- registration (PyTorch's explicit spellings of setting an attribute) ---------------------
    def _check_name(self, kind: str, name: Any, registered: frozenset[str]) -> None:
        """PyTorch's checks of a name for ``register_<kind>``: a string, not empty, no dot,
        not an attribute of another kind."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name in registered or not hasattr(self, name):
            return
        current = getattr(self, name)
        # Replacing a value of the same kind, or filling a None (gingham layers set optional
        # tensors such as Linear's bias to None without registering them), is allowed.
        if current is None or (kind == "module" and isinstance(current, Module)):
            return
        own = dict(self._own_tensors())
        if name in own and self._tensor_kind(name, own[name]) == kind:
            return
        raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Make ``tensor`` the buffer ``name`` (an attribute): in :meth:`named_buffers` even
        if it requires gradients or its name starts with ``_``, moved by ``to()``, and in
        :meth:`state_dict` unless ``persistent`` is false. ``None`` reserves the name (no
        buffer until a tensor is assigned to it). As PyTorch's:

            self.register_buffer("running_max", gingham.zeros(4))
            self.register_buffer("_mask", causal_mask, persistent=False)  # not saved
        """
        self._check_name("buffer", name, self._registered_buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (gingham Tensor or None required)")
        setattr(self, name, tensor)
        self._registered_parameters = self._registered_parameters - {name}
        self._registered_buffers = self._registered_buffers | {name}
        if persistent:
            self._non_persistent_buffers_set = self._non_persistent_buffers_set - {name}
        else:
            self._non_persistent_buffers_set = self._non_persistent_buffers_set | {name}

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Make the leaf tensor ``param`` the parameter ``name`` (an attribute): in
        :meth:`named_parameters` even when it does not require gradients (a frozen parameter,
        as PyTorch's) or its name starts with ``_``. ``None`` reserves the name.

            self.register_parameter("scale", gingham.ones(8).requires_grad_())
        """
        self._check_name("parameter", name, self._registered_parameters)
        if param is not None and not isinstance(param, Tensor):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (gingham Tensor or None required)")
        if param is not None and not param.is_leaf:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             "parameters must be created explicitly. To express "
                             f"'{name}' as a function of another Tensor, compute the value "
                             "in the forward() method.")
        setattr(self, name, param)
        self._registered_buffers = self._registered_buffers - {name}
        self._non_persistent_buffers_set = self._non_persistent_buffers_set - {name}
        self._registered_parameters = self._registered_parameters | {name}

    def add_module(self, name: str, module: "Module | None") -> None:
        """Make ``module`` the child ``name`` (an attribute), as PyTorch's; ``None`` reserves
        the name. Containers put it in their sequence or mapping.

            self.add_module("head", nn.Linear(512, 10))      # same as self.head = ...
        """
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name("module", name, frozenset())
        setattr(self, name, module)

    def register_module(self, name: str, module: "Module | None") -> None:
        """Alias of :meth:`add_module`."""
        self.add_module(name, module)

    # -- the tree of modules -----------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """The direct sub-modules with their names, in attribute order: a module attribute by
        its name, the modules in a list or tuple attribute as ``attr.0``, ``attr.1``, ..."""
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for index, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{name}.{index}", item

    def children(self) -> Iterator["Module"]:
        for _, child in self.named_children():
            yield child

    def named_modules(self, memo: set["Module"] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """This module (named ``prefix``) and every sub-module, depth first in attribute
        order, with dotted names. A module reached twice (or already in ``memo``, which
        collects the modules listed) is listed once, under its first name, unless
        ``remove_duplicate`` is false."""
        if memo is None:
            memo = set()
        return self._walk(prefix, memo if remove_duplicate else None)

    def _walk(self, prefix: str, seen: set["Module"] | None
              ) -> Iterator[tuple[str, "Module"]]:
        if seen is not None:
            if self in seen:
                return
            seen.add(self)
        yield prefix, self
        for name, child in self.named_children():
            yield from child._walk(_join(prefix, name), seen)

    def get_submodule(self, target: str) -> "Module":
        """The sub-module named ``target`` (a dotted name of :meth:`named_modules`; ``""``
        is this module). ``AttributeError`` names the first part that is not a module.

            model.get_submodule("encoder.layers.0.linear1")
        """
        if target == "":
            return self
        modules = dict(self.named_modules(remove_duplicate=False))
        if target in modules:
            return modules[target]
        parts = target.split(".")
        found = max(end for end in range(len(parts)) if ".".join(parts[:end]) in modules)
        owner = modules[".".join(parts[:found])]
        raise AttributeError(f"{type(owner).__name__} has no submodule `{parts[found]}` "
                             f"(looking for `{target}`)")

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Put ``module`` at the dotted name ``target`` (its owner must exist); with
        ``strict``, only replace an existing sub-module (``AttributeError`` otherwise).

            model.set_submodule("encoder.norm", nn.Identity())
        """
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise TypeError(f"`module` is not an nn.Module, found {type(module).__name__}")
        owner_name, _, name = target.rpartition(".")
        owner = self.get_submodule(owner_name)
        if strict and name not in dict(owner.named_children()):
            raise AttributeError(f"{type(owner).__name__} has no submodule `{name}`")
        owner.add_module(name, module)

    def _get_tensor(self, target: str, kind: str) -> Tensor:
        owner_name, _, name = target.rpartition(".")
        owner = self.get_submodule(owner_name)
        own = dict(owner._own_tensors())
        if name not in own:
            raise AttributeError(f"{type(owner).__name__} has no {kind} `{name}`")
        if owner._tensor_kind(name, own[name]) != kind:
            raise AttributeError(f"`{name}` is not a {kind} of {type(owner).__name__}")
        return own[name]

    def get_parameter(self, target: str) -> Tensor:
        """The parameter named ``target`` (as in :meth:`named_parameters`);
        ``AttributeError`` if there is none or it is a buffer.

            model.get_parameter("encoder.layers.0.linear1.weight")
        """
        return self._get_tensor(target, "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer named ``target`` (as in :meth:`named_buffers`); ``AttributeError`` if
        there is none or it is a parameter.

            model.get_buffer("bn1.running_mean")
        """
        return self._get_tensor(target, "buffer")

    def modules(self, remove_duplicate: bool = True) -> Iterator["Module"]:
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    # -- parameters and buffers ------------------------------------------------------------------
    def _own_tensors(self) -> Iterator[tuple[str, Tensor]]:
        """This module's parameters and buffers (not its children's), in attribute order:
        its public tensor attributes and the registered ones."""
        registered = self._registered_parameters | self._registered_buffers
        for name, value in vars(self).items():
            if isinstance(value, Tensor) and (not name.startswith("_") or name in registered):
                yield name, value

    def _tensor_kind(self, name: str, value: Tensor) -> str:
        """``"parameter"`` or ``"buffer"``, for a tensor of :meth:`_own_tensors`: what its
        registration said, else whether it requires gradients."""
        if name in self._registered_parameters:
            return "parameter"
        if name in self._registered_buffers:
            return "buffer"
        return "parameter" if value.requires_grad or isinstance(value, Parameter) else "buffer"

    def _named_tensors(self, prefix: str, recurse: bool, remove_duplicate: bool,
                       kinds: tuple[str, ...], persistent_only: bool = False
                       ) -> Iterator[tuple[str, Tensor]]:
        walk = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse
                else iter([(prefix, self)]))
        seen: set[int] = set()
        for module_prefix, module in walk:
            for name, value in module._own_tensors():
                if module._tensor_kind(name, value) not in kinds or (
                        remove_duplicate and id(value) in seen) or (
                        persistent_only and name in module._non_persistent_buffers_set):
                    continue
                seen.add(id(value))
                yield _join(module_prefix, name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, tensor)`` of every parameter: this module's own in attribute
        order, then each child's, depth first. A tensor shared by two modules is listed once
        (under every name with ``remove_duplicate=False``)."""
        return self._named_tensors(prefix, recurse, remove_duplicate, ("parameter",))

    def parameters(self, recurse: bool = True) -> TensorListing:
        """The parameters in :meth:`named_parameters`' order (the order optimisers and
        ``gingham.jit`` see): a list, which ``next()`` also steps through."""
        return TensorListing(p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, tensor)`` of every buffer (registered ones, and public tensor
        attributes that do not require gradients), in the order of :meth:`named_parameters`."""
        return self._named_tensors(prefix, recurse, remove_duplicate, ("buffer",))

    def buffers(self, recurse: bool = True) -> TensorListing:
        return TensorListing(b for _, b in self.named_buffers(recurse=recurse))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (or, with ``set_to_none=False``, make it zeros)."""
        for p in self.parameters():
            p.grad = None if set_to_none else zeros(p.shape, p.dtype, device=p.device)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Make every parameter require gradients (or not), in place, as PyTorch's: frozen
        ones stay parameters (registered as such), so ``requires_grad_(True)`` finds them
        again. Returns ``self``.

            model.backbone.requires_grad_(False)        # fine-tune the head only
        """
        for module in self.modules():
            names = [name for name, value in module._own_tensors()
                     if module._tensor_kind(name, value) == "parameter"]
            for name in names:
                getattr(module, name).requires_grad_(requires_grad)
            module._registered_parameters = module._registered_parameters | set(names)
        return self

    # -- hooks -----------------------------------------------------------------------------------
    def _jit_watched(self) -> Mapping[str, Any]:
        """What a compiled step depends on (see :func:`gingham.jit`): the public attributes,
        and which hooks run (their tables are private, but adding or removing a hook changes
        what a traced call computes, so it must trace again)."""
        state = vars(self)
        if not has_hooks(self):
            return state
        return {**state, "hooks": hook_ids(self)}

    def _hook_table(self, name: str) -> OrderedDict:
        """The hook table ``name`` of this module, made on first use (modules need no
        ``__init__`` of their own)."""
        table = vars(self).get(name)
        if table is None:
            table = vars(self)[name] = OrderedDict()
        return table

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Run ``hook(module, args)`` before each ``forward``; a value it returns replaces
        the positional arguments (a non-tuple becomes a 1-tuple). With ``with_kwargs``,
        ``hook(module, args, kwargs)`` returns None or ``(args, kwargs)``. ``prepend`` puts it
        before this module's other pre-hooks. As PyTorch's; the handle's ``remove()`` undoes.

            handle = layer.register_forward_pre_hook(lambda m, args: (args[0] / 255,))
        """
        return add_hook(self._hook_table("_forward_pre_hooks"), hook, prepend=prepend,
                        flags=((self._hook_table("_forward_pre_hooks_with_kwargs"),
                                with_kwargs),))

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False, always_call: bool = False
                              ) -> RemovableHandle:
        """Run ``hook(module, args, output)`` after each ``forward`` (``hook(module, args,
        kwargs, output)`` with ``with_kwargs``); a value it returns replaces the output.
        ``prepend`` puts it before this module's other forward hooks; ``always_call`` runs it
        even when ``forward`` raised. As PyTorch's; the handle's ``remove()`` undoes.

            features = {}
            model.layer4.register_forward_hook(lambda m, args, out: features.update(l4=out))
        """
        return add_hook(self._hook_table("_forward_hooks"), hook, prepend=prepend,
                        flags=((self._hook_table("_forward_hooks_with_kwargs"), with_kwargs),
                               (self._hook_table("_forward_hooks_always_called"),
                                always_call)))

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False
                                        ) -> RemovableHandle:
        """Run ``hook(module, grad_output)`` when the gradients with respect to this module's
        outputs are known, before they flow into it: ``grad_output`` has one entry per output
        (None for one that is not a tensor, or that no gradient reached), and a tuple the hook
        returns replaces it. ``prepend`` puts it before this module's other backward
        pre-hooks (the global ones still run first). As PyTorch's; see
        :meth:`register_full_backward_hook` for how the hooks run (inside ``gingham.jit``,
        once, at tracing).

            layer.register_full_backward_pre_hook(
                lambda m, grad_output: tuple(g.clamp(-1, 1) for g in grad_output))
        """
        return add_hook(self._hook_table("_backward_pre_hooks"), hook, prepend=prepend)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False
                                    ) -> RemovableHandle:
        """Run ``hook(module, grad_input, grad_output)`` when the gradients with respect to
        this module's inputs are computed: ``grad_input`` has one entry per positional
        argument (None for one that is not a tensor, zeros for a tensor that needs no
        gradient, as PyTorch's; keyword arguments are not seen), ``grad_output`` one per
        output (None where no gradient arrived); a tuple the hook returns
        replaces ``grad_input`` on its way to the inputs (this module's own parameters'
        gradients are not changed). When no argument requires a gradient (the first layer),
        the hook runs when the gradients of the outputs are known, with ``grad_input`` all
        None, and may only return None (PyTorch warns there; so does gingham); when no output
        requires one, it never runs. As PyTorch's: the call passes its arguments and outputs
        through an identity node (``BackwardHookFunctionBackward``) that collects the
        gradients. Global hooks (:func:`gingham.nn.hooks.register_module_full_backward_hook`)
        run first; ``prepend`` puts this one before the module's others.

        Gradients are lazy tensors and the hooks run while the backward pass builds them, so
        inside ``gingham.jit`` a hook runs once, when the step is traced: a gradient it
        returns is part of the compiled step (replayed every call), while what it stores is a
        value of the trace only; to read a gradient at every step, return it from the step.

            grads = {}
            model.layer4.register_full_backward_hook(
                lambda m, grad_input, grad_output: grads.update(layer4=grad_output[0]))
            model(x).sum().backward()          # grads["layer4"]: d(sum)/d(layer4's output)
        """
        return add_hook(self._hook_table("_backward_hooks"), hook, prepend=prepend)

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(module, prefix, keep_vars)`` before :meth:`state_dict` reads this
        module's tensors (``prefix``: its keys' start, as ``"encoder."``), as PyTorch's.

            model.register_state_dict_pre_hook(lambda m, prefix, keep_vars: m.sync())
        """
        return add_hook(self._hook_table("_state_dict_pre_hooks"), hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(module, state_dict, prefix, local_metadata)`` when :meth:`state_dict`
        is done (a module's hooks after its sub-modules'); it may change ``state_dict`` in
        place and must return None. As PyTorch's, except that the hook sees the whole state
        dict (its values as returned: arrays unless ``keep_vars``), not only what precedes.

            model.register_state_dict_post_hook(
                lambda m, state, prefix, meta: state.pop(prefix + "cache", None))
        """
        return add_hook(self._hook_table("_state_dict_post_hooks"), hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before :meth:`load_state_dict` reads the module's
        entries (``prefix``: their start, as ``"encoder."``), as PyTorch's: it may rename or
        convert entries of ``state_dict`` (a copy of the caller's), add names to the two key
        lists, or add messages to ``error_msgs`` (which make the load fail).

            def rename(module, state, prefix, *rest):      # an old checkpoint's name
                if prefix + "w" in state:
                    state[prefix + "weight"] = state.pop(prefix + "w")
            model.fc.register_load_state_dict_pre_hook(rename)
        """
        return add_hook(self._hook_table("_load_state_dict_pre_hooks"), hook)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(module, incompatible_keys)`` after :meth:`load_state_dict` loaded into
        this module or a module above it; the hook may remove names from the
        ``missing_keys`` and ``unexpected_keys`` lists, and ``strict`` judges what is left
        (the values are loaded before that judgement then, as in PyTorch). Must return None.

            model.register_load_state_dict_post_hook(
                lambda m, keys: keys.missing_keys.clear())      # tolerate missing keys
        """
        return add_hook(self._hook_table("_load_state_dict_post_hooks"), hook)

    # -- state dicts -----------------------------------------------------------------------------
    def get_extra_state(self) -> Any:
        """What a module stores in its state dict beyond tensors, under ``_extra_state``:
        override it with :meth:`set_extra_state` (the base module stores nothing)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never "
                           "be called: override get_extra_state() to return the extra state")

    def set_extra_state(self, state: Any) -> None:
        """Take back what :meth:`get_extra_state` returned, when a state dict is loaded."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never "
                           "be called: override set_extra_state() to take the extra state")

    def _persistent_tensors(self) -> list[tuple[str, Tensor]]:
        """This module's state-dict tensors: its parameters, then its persistent buffers
        (PyTorch's order), each group in attribute order."""
        own = [(name, value) for name, value in self._own_tensors()
               if name not in self._non_persistent_buffers_set]
        return sorted(own, key=lambda item: self._tensor_kind(*item) != "parameter")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    def state_dict(self, *args, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Any]":
        """Every parameter and persistent buffer by dotted name (each key starts with
        ``prefix``, as ``"model."``), as NumPy arrays (copies; the tensors themselves with
        ``keep_vars=True``), module by module in attribute order, with a module's
        ``get_extra_state()`` under ``<name>._extra_state`` when it defines one. Written into
        ``destination`` when given (and returned). A tensor shared by two modules appears under
        both names, as in PyTorch.

            torch_model.load_state_dict({k: torch.from_numpy(v)
                                         for k, v in model.state_dict().items()})
        """
        if args:  # PyTorch's deprecated positional form: (destination, prefix, keep_vars)
            warnings.warn("Positional args are being deprecated, use kwargs instead: "
                          "state_dict(destination=..., prefix=..., keep_vars=...)",
                          FutureWarning, stacklevel=2)
            destination = args[0] if destination is None else destination
            prefix = args[1] if len(args) > 1 and prefix == "" else prefix
            keep_vars = args[2] if len(args) > 2 and not keep_vars else keep_vars
        entries: list[tuple[str, Any]] = []
        for module_prefix, module in self.named_modules(remove_duplicate=False):
            start = prefix + (module_prefix + "." if module_prefix else "")
            for hook in list(vars(module).get("_state_dict_pre_hooks", {}).values()):
                hook(module, start, keep_vars)
            entries += [(start + name, value) for name, value in module._persistent_tensors()]
            if module._has_extra_state():
                entries.append((start + "_extra_state", module.get_extra_state()))
        if not keep_vars:
            realize([value for _, value in entries if isinstance(value, Tensor)])  # one program
            entries = [(name, value.numpy() if isinstance(value, Tensor) else value)
                       for name, value in entries]
        if destination is None:
            destination = OrderedDict()
        destination.update(entries)
        walk = list(self.named_modules(remove_duplicate=False))
        for module_prefix, module in reversed(walk):  # sub-modules before their owners
            for hook in list(vars(module).get("_state_dict_post_hooks", {}).values()):
                start = prefix + (module_prefix + "." if module_prefix else "")
                if hook(module, destination, start, {}) is not None:
                    raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _load_targets(self) -> "OrderedDict[str, tuple[Module, str, Tensor | None]]":
        """Each state-dict name with the module and attribute holding its tensor (None for a
        module's ``_extra_state``)."""
        targets: OrderedDict[str, tuple[Module, str, Tensor | None]] = OrderedDict()
        for module_prefix, module in self.named_modules(remove_duplicate=False):
            for name, value in module._persistent_tensors():
                targets[_join(module_prefix, name)] = (module, name, value)
            if type(module).set_extra_state is not Module.set_extra_state:
                targets[_join(module_prefix, "_extra_state")] = (module, "_extra_state", None)
        return targets

    def _run_load_pre_hooks(self, state_dict: Mapping[str, Any], strict: bool,
                            missing: list[str], unexpected: list[str],
                            problems: list[str]) -> Mapping[str, Any]:
        """``state_dict`` after every module's load pre-hooks (on a copy, when there are
        any: they may edit it); the lists take what the hooks add."""
        walk = [(name, module) for name, module in self.named_modules(remove_duplicate=False)
                if vars(module).get("_load_state_dict_pre_hooks")]
        if not walk:
            return state_dict
        metadata = getattr(state_dict, "_metadata", None) or {}
        state_dict = OrderedDict(state_dict)
        for module_prefix, module in walk:
            for hook in list(module._load_state_dict_pre_hooks.values()):
                hook(module, state_dict, module_prefix + "." if module_prefix else "",
                     metadata.get(module_prefix, {}), strict, missing, unexpected, problems)
        return state_dict

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Copy ``state_dict``'s arrays (NumPy arrays, PyTorch tensors, gingham tensors) into
        the parameters and persistent buffers of the same names, keeping each tensor's device,
        dtype, ``requires_grad`` and identity (optimisers and compiled steps holding it see the
        new value). With ``assign``, each becomes a new tensor of the state dict's dtype (on
        the module's tensor's device, with its ``requires_grad``) instead, as PyTorch's. A
        batch norm's ``num_batches_tracked`` may be missing (it then keeps its value), as in
        PyTorch. Modules with ``set_extra_state`` take their ``_extra_state`` entry.

        Raises :class:`gingham.StateDictError`, listing every problem and loading nothing,
        for a shape (or, without ``assign``, a dtype) that differs from the module's, and
        (``strict``, the default) for missing or unexpected names. Returns the missing and
        unexpected names.

            model.load_state_dict(torch_model.state_dict())
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected a dict-like state dict (names to "
                            f"arrays), got {type(state_dict).__name__}")
        missing, unexpected, problems = [], [], []
        state_dict = self._run_load_pre_hooks(state_dict, strict, missing, unexpected, problems)
        targets = self._load_targets()
        missing += [name for name, (module, attribute, _) in targets.items()
                    if name not in state_dict and attribute not in module._optional_state
                    and name not in missing]
        unexpected += [key for key in state_dict if key not in targets and key not in unexpected]
        arrays: dict[str, np.ndarray] = {}
        for name, (_, _, target) in targets.items():
            if name in state_dict and target is not None:
                array, problem = _loadable_array(name, state_dict[name], target, assign)
                if problem:
                    problems.append(problem)
                else:
                    arrays[name] = array
        post_hooks = [(module, hook) for module in self.modules()
                      for hook in vars(module).get("_load_state_dict_post_hooks", {}).values()]
        if strict and not post_hooks:  # without hooks to forgive them, load nothing
            problems = _key_problems(missing, unexpected) + problems
            nested = [key for key in unexpected if isinstance(state_dict[key], Mapping)]
            if missing and nested:  # {"model": ..., "optimizer": ...} given whole
                entries = ", ".join(map(repr, nested))
                problems.append(f"({entries} {'holds a dict' if len(nested) == 1 else 'hold dicts'}"
                                f": a checkpoint? load checkpoint[{nested[0]!r}])")
        if problems:
            raise self._load_error(problems, missing, unexpected)
        _load_arrays(targets, arrays, assign)
        for name, (module, attribute, target) in targets.items():
            if target is None and name in state_dict:
                module.set_extra_state(state_dict[name])
        result = IncompatibleKeys(missing, unexpected)
        for module, hook in post_hooks:
            if hook(module, result) is not None:
                raise RuntimeError("load_state_dict post-hook must return None")
        if strict and post_hooks and (missing or unexpected):
            raise self._load_error(_key_problems(missing, unexpected), missing, unexpected)
        return result

    def _load_error(self, problems: list[str], missing: list[str],
                    unexpected: list[str]) -> StateDictError:
        return StateDictError(f"error(s) loading a state dict into {type(self).__name__}:\n"
                              + "\n".join(f"  {p}" for p in problems), missing, unexpected)

    # -- modes and devices -------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        self.training = mode
        for child in self.children():
            child.train(mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def to(self, *args, device=None, dtype=None, non_blocking: bool = False,
           memory_format=None) -> "Module":
        """Move every tensor attribute (parameters, buffers, private tensors) of this module
        and its sub-modules to a device and/or cast its floating-point ones to a dtype, in
        place, as PyTorch's ``module.to``: ``to(device)``, ``to(dtype)``, ``to(device,
        dtype)``, ``to(tensor)``, or the keywords. Integer and bool tensors keep their dtype;
        ``dtype`` must be a floating-point type (``TypeError`` otherwise). Returns ``self``.

        Each tensor stays the same object (its value, and its pending gradient, move into
        it), so an optimiser made before the move keeps training the model (its state
        follows its parameters at its next step) and a compiled step that captured them is
        traced again for the new device. An error inside ``gingham.jit``'s tracing.
        ``non_blocking`` is accepted and ignored; ``memory_format`` (``gingham.channels_last``)
        is checked against each 4-d and 5-d tensor and lays it out so, as PyTorch's (which
        changes no value, and what ``is_contiguous`` answers: gingham's compiler picks the
        layouts, see :mod:`gingham.frontend.strides`).

            opt = gingham.optim.SGD(model.parameters(), lr=0.1)
            model.to("cuda:0")                      # then train: opt updates the moved weights
            model.to(dtype="bfloat16")              # float parameters and buffers only
        """
        if memory_format is not None:
            laid_out = [value for value in [*self.parameters(), *self.buffers()]
                        if value.ndim in (4, 5)]
            for value in laid_out:  # all checked before any changes
                _memory_format("Module.to", memory_format, value.ndim)
            for value in laid_out:
                value._layout = value._layout.with_strides(
                    relaid(value.shape, value._layout.strides, memory_format)[1])
        target_device, target_dtype = placement(args, device, dtype)
        if target_dtype is not None and not dt.is_float(target_dtype):
            raise TypeError("nn.Module.to only accepts floating point dtypes, but got desired "
                            f"dtype={_dtype_name(target_dtype)}")
        self._move(target_device, target_dtype)
        return self

    def _move(self, device: str | None, dtype: np.dtype | None) -> None:
        """Every tensor attribute of the tree to ``device`` (None: stay), floating-point ones
        cast to ``dtype`` (None: keep), leaves in place (one ``move_all``); a lazy result
        kept by a module is replaced by a leaf, as in :func:`_load_arrays`."""
        moves: dict[int, tuple[Tensor, str, np.dtype]] = {}
        replaced = []
        for module in self.modules():
            for name, value in vars(module).items():
                if not isinstance(value, Tensor):
                    continue
                new_dtype = dtype if dtype is not None and dt.is_float(value.dtype) else None
                placed = (device or value.device, value.dtype if new_dtype is None else new_dtype)
                if value.is_leaf:
                    moves[id(value)] = (value, *placed)
                elif placed != (value.device, value.dtype):
                    replaced.append((module, name, value, placed))
        changing = [m for m in moves.values() if (m[0].device, m[0].dtype) != m[1:]]
        if changing or replaced:
            refuse_while_tracing(f"{type(self).__name__}.to()")
        move_all(changing)
        for module, name, value, (new_device, new_dtype) in replaced:
            setattr(module, name, value.to(new_device, new_dtype))

    def cpu(self) -> "Module":
        """``to("cpu")``: gingham's C backend (the host CPU)."""
        return self.to("cpu")

    def cuda(self, device: int | str | None = None) -> "Module":
        """``to("cuda:N")`` (``device``: an index or a ``"cuda:N"`` id, default 0);
        :class:`gingham.DeviceNotFoundError` says why when there is no such CUDA device."""
        return self.to(cuda_id(device))

    def float(self) -> "Module":
        """Floating-point parameters and buffers to float32."""
        return self.to(dtype=dt.FLOAT32)

    def half(self) -> "Module":
        """Floating-point parameters and buffers to float16."""
        return self.to(dtype="float16")

    def bfloat16(self) -> "Module":
        """Floating-point parameters and buffers to bfloat16."""
        return self.to(dtype="bfloat16")

    def double(self) -> "Module":
        """Floating-point parameters and buffers to float64."""
        return self.to(dtype="float64")

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
        """Call ``fn`` on every sub-module, then on this one (custom initialisation)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # -- printing --------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """This module's settings, for ``repr`` (as PyTorch's ``extra_repr``)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr().split("\n") if self.extra_repr() else []
        children = [f"({name}): {_add_indent(repr(child), 2)}"
                    for name, child in self.named_children()]
        if len(extra) == 1 and not children:
            return f"{type(self).__name__}({extra[0]})"
        if not extra and not children:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}(\n  " + "\n  ".join(extra + children) + "\n)"


def _key_problems(missing: list[str], unexpected: list[str]) -> list[str]:
    return ([f"missing key(s): {', '.join(missing)}"] if missing else []) + (
        [f"unexpected key(s): {', '.join(unexpected)}"] if unexpected else [])


def _loadable_array(name: str, value: Any, target: Tensor,
                    assign: bool = False) -> tuple[np.ndarray | None, str]:
    """``value`` as an array for ``target`` (whose dtype it must have unless ``assign``), or
    the reason it cannot be loaded."""
    try:
        array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    except Exception as exc:  # a value np.asarray cannot read: report it with the others
        return None, f"{name}: cannot be read as an array ({type(exc).__name__}: {exc})"
    if array.shape != target.shape:
        return None, (f"{name}: shape {array.shape} in the state dict, {target.shape} in the "
                      "module")
    if array.dtype != target.dtype and not assign:
        return None, (f"{name}: dtype {_dtype_name(array.dtype)} in the state dict, "
                      f"{_dtype_name(target.dtype)} in the module (cast it with .astype())")
    return array, ""


def _load_arrays(targets: Mapping[str, tuple[Module, str, Tensor]],
                 arrays: Mapping[str, np.ndarray], assign: bool = False) -> None:
    """Leaves take their new values by ``assign`` (same objects, all in one program); a lazy
    tensor attribute (a result kept by a module), or every one with ``assign``, is replaced by
    a new leaf on its device."""
    pairs: dict[int, tuple[Tensor, Tensor]] = {}
    replacements: dict[int, Tensor] = {}  # a tensor shared by two modules stays shared
    for name, array in arrays.items():
        module, attribute, target = targets[name]
        if target.is_leaf and not assign:
            pairs[id(target)] = (target, tensor(array, device=target.device))
            continue
        if id(target) not in replacements:
            replacements[id(target)] = tensor(array, device=target.device,
                                              requires_grad=target.requires_grad)
        setattr(module, attribute, replacements[id(target)])
    if pairs:
        assign_all(list(pairs.values()))


def _check_sizes(layer: str, **sizes) -> None:
    """A layer's size arguments, checked when it is made: each an int (``TypeError``) and not
    negative (:class:`ShapeError`, PyTorch's ``Trying to create tensor with negative
    dimension``), named with the layer, rather than an error from NumPy's allocation.

        _check_sizes("Linear", in_features=4, out_features=-2)   # ShapeError
    """
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"{layer}: {name} must be an int, not {type(size).__name__} "
                            f"({size!r})")
        if size < 0:
            raise ShapeError(f"{layer}: {name} must be non-negative, got {size}")


def _fan_in_bound(fan_in: int) -> float:
    """PyTorch's default bound ``1/sqrt(fan_in)`` of a weight and its bias (0 for a layer
    with no inputs, whose weight is empty)."""
    return 1.0 / math.sqrt(fan_in) if fan_in else 0.0


def _uniform(shape, bound: float, device: str | None, rng: np.random.Generator) -> Tensor:
    values = rng.uniform(-bound, bound, size=shape).astype(default_float())
    return Parameter(tensor(values, device=device))


_default_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seed parameter initialisation (and nothing else)."""
    global _default_rng
    _default_rng = np.random.default_rng(seed)


# The initialisation generator's PCG64 state as uint32 words: its 128-bit state and increment,
# four words each, then has_uint32 and uinteger (NumPy's bit_generator.state, as an array).
INIT_STATE_WORDS = 10


def _words(value: int, count: int) -> list[int]:
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(count)]


def _number(words) -> int:
    return sum(int(word) << (32 * i) for i, word in enumerate(words))


def init_rng_state() -> np.ndarray:
    """The state of parameter initialisation's generator (a ``uint32`` array)."""
    state = _default_rng.bit_generator.state
    pcg = state["state"]
    return np.array(_words(pcg["state"], 4) + _words(pcg["inc"], 4)
                    + [state["has_uint32"], state["uinteger"]], np.uint32)


def set_init_rng_state(words: np.ndarray) -> None:
    """Continue parameter initialisation from a state :func:`init_rng_state` returned."""
    global _default_rng
    rng = np.random.default_rng()
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": _number(words[:4]), "inc": _number(words[4:8])},
        "has_uint32": int(words[8]), "uinteger": int(words[9])}
    _default_rng = rng


def _format_repr(data_format: str | None) -> str:
    """The ``data_format`` part of an image layer's repr (nothing for PyTorch's NCHW)."""
    return "" if data_format in (None, "NCHW") else f", data_format={data_format!r}"


def _layout(data_format: str | None) -> dict[str, str]:
    """The ``data_format`` keyword for the functional op: only the 2-d layers have one."""
    return {} if data_format is None else {"data_format": data_format}


def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


# -- linear, convolution, normalisation, embedding -------------------------------------------------


class Linear(Module):
    """``x @ weight.T + bias`` with a ``[out_features, in_features]`` weight.

        layer = Linear(128, 10)                                  # [..., 128] -> [..., 10]
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: str | None = None) -> None:
        _check_sizes("Linear", in_features=in_features, out_features=out_features)
        self.in_features, self.out_features = in_features, out_features
        bound = _fan_in_bound(in_features)
        self.weight = _uniform((out_features, in_features), bound, device, _default_rng)
        self.bias = _uniform((out_features,), bound, device, _default_rng) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _image_format(layer: str, data_format: str) -> str:
    """``data_format`` checked once, when the layer is made (``ValueError`` naming it)."""
    F._data_format(layer, data_format, 2)
    return data_format


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What the convolutions share: PyTorch's settings as tuples (``kernel_size``, ``stride``,
    ``padding`` unless a string, ``dilation``, ``output_padding``), the weight
    ``[out, in/groups, *kernel]`` (``[in, out/groups, *kernel]`` transposed) and the bias,
    both uniform in ``±1/sqrt(fan_in)`` (PyTorch's Kaiming-uniform with a = sqrt(5), ``fan_in``
    the weight's ``shape[1] * prod(kernel)``), and PyTorch's repr."""

    _nd: int
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, groups: int, bias: bool, padding_mode: str, device: str | None,
                 output_padding=0, data_format: str | None = None) -> None:
        layer, nd = type(self).__name__, self._nd
        _check_sizes(layer, in_channels=in_channels, out_channels=out_channels)
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{layer}: groups={groups} must divide in_channels {in_channels} "
                             f"and out_channels {out_channels}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{layer}: padding_mode must be one of {_PADDING_MODES}, not "
                             f"{padding_mode!r}")
        if padding_mode != "zeros" and self._transposed:
            raise ValueError(f'Only "zeros" padding mode is supported for {layer}')
        self.data_format = data_format
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = F._ntuple(layer, "kernel_size", kernel_size, nd)
        self.stride = F._ntuple(layer, "stride", stride, nd)
        for name, values in (("kernel_size", self.kernel_size), ("stride", self.stride),
                             ("dilation", F._ntuple(layer, "dilation", dilation, nd))):
            if min(values) < 1:
                raise ShapeError(f"{layer}: {name} must be positive, got {values}")
        if isinstance(padding, str):
            if self._transposed or padding not in ("valid", "same"):
                allowed = "ints" if self._transposed else "ints, 'valid' or 'same'"
                raise ValueError(f"{layer}: padding must be {allowed}, not {padding!r}")
            if padding == "same" and self.stride != (1,) * nd:
                raise ValueError(f"{layer}: padding='same' needs stride 1, got {self.stride}")
            self.padding = padding
        else:
            self.padding = F._ntuple(layer, "padding", padding, nd)
        self.dilation = F._ntuple(layer, "dilation", dilation, nd)
        self.output_padding = F._ntuple(layer, "output_padding", output_padding, nd)
        self.padding_mode = padding_mode
        weight_channels = ((in_channels, out_channels // groups) if self._transposed
                           else (out_channels, in_channels // groups))
        bound = _fan_in_bound(weight_channels[1] * math.prod(self.kernel_size))
        self.weight = _uniform(weight_channels + self.kernel_size, bound, device, _default_rng)
        self.bias = _uniform((out_channels,), bound, device, _default_rng) if bias else None

    def extra_repr(self) -> str:
        nd = self._nd
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        text += f", padding={self.padding}" if self.padding != (0,) * nd else ""
        text += f", dilation={self.dilation}" if self.dilation != (1,) * nd else ""
        if self.output_padding != (0,) * nd:
            text += f", output_padding={self.output_padding}"
        text += f", groups={self.groups}" if self.groups != 1 else ""
        text += ", bias=False" if self.bias is None else ""
        text += f", padding_mode={self.padding_mode}" if self.padding_mode != "zeros" else ""
        return text + _format_repr(self.data_format)


class _PlainConvNd(_ConvNd):
    """Convolution (PyTorch's signature, plus ``data_format`` for the 2-d layer).
    ``padding_mode`` ``"reflect"``, ``"replicate"`` or ``"circular"`` pads the input by
    :func:`F.pad` in that mode before an unpadded convolution, as PyTorch's layers do."""

    function: Callable[..., Tensor]

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: str | None = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device)

    def forward(self, x: Tensor) -> Tensor:
        padding = self.padding
        if self.padding_mode != "zeros":  # PyTorch's order: pad by the mode, then convolve
            unbatched_nhwc = self.data_format == "NHWC" and x.ndim == 3
            batch = x.unsqueeze(0) if unbatched_nhwc else x  # F.pad's 3 axes need a batch
            padded = F.pad(batch, self._mode_padding(), mode=self.padding_mode)
            x, padding = padded.squeeze(0) if unbatched_nhwc else padded, 0
        return type(self).function(x, self.weight, self.bias, self.stride, padding,
                                   self.dilation, self.groups, **_layout(self.data_format))

    def _mode_padding(self) -> tuple[int, ...]:
        """:func:`F.pad`'s amounts for ``padding``, last spatial axis first; ``"same"`` puts
        the odd tap on the right, as the zero padding does. A channels-last input's channel
        axis comes last: it is padded by nothing."""
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            sides = [(t // 2, t - t // 2) for t in totals]
        else:
            sides = [(p, p) for p in ((0,) * self._nd if self.padding == "valid"
                                      else self.padding)]
        amounts = tuple(v for pair in reversed(sides) for v in pair)
        return (0, 0) + amounts if self.data_format == "NHWC" else amounts


class Conv1d(_PlainConvNd):
    """1-D convolution of ``[N, C, L]`` data with an ``[out, in/groups, k]`` weight:

        conv = Conv1d(16, 32, 5, padding=2)                     # [N, 16, L] -> [N, 32, L]
    """

    _nd = 1
    function = staticmethod(F.conv1d)


class Conv2d(_PlainConvNd):
    """2-D convolution with an ``[out, in/groups, kh, kw]`` weight (PyTorch's OIHW), on NCHW
    data or, with ``data_format="NHWC"``, channels-last data:

        conv = Conv2d(3, 64, 3, padding=1, data_format="NHWC")   # [N, H, W, 3] -> [N, H, W, 64]
    """

    _nd = 2
    function = staticmethod(F.conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: str | None = None, data_format: str = "NCHW") -> None:
        _ConvNd.__init__(self, in_channels, out_channels, kernel_size, stride, padding,
                         dilation, groups, bias, padding_mode, device,
                         data_format=_image_format("Conv2d", data_format))


class Conv3d(_PlainConvNd):
    """3-D convolution of ``[N, C, D, H, W]`` data with an ``[out, in/groups, kd, kh, kw]``
    weight:

        conv = Conv3d(1, 8, 3, padding=1)                       # [N, 1, D, H, W] -> [N, 8, ..]
    """

    _nd = 3
    function = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    """Transposed convolution (PyTorch's signature: ``output_padding`` before ``groups``,
    ``dilation`` after ``bias``). ``forward(x, output_size)`` picks the ``output_padding``
    that gives ``output_size``, as PyTorch's does."""

    _transposed = True
    function: Callable[..., Tensor]

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device: str | None = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, output_padding)

    def forward(self, x: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        output_padding = self._output_padding(x, output_size)
        return type(self).function(x, self.weight, self.bias, self.stride, self.padding,
                                   output_padding, self.groups, self.dilation)

    def _output_padding(self, x: Tensor, output_size: Sequence[int] | None) -> tuple[int, ...]:
        if output_size is None:
            return self.output_padding
        nd, layer = self._nd, type(self).__name__
        size = tuple(int(s) for s in output_size)
        if len(size) == nd + 2:  # PyTorch accepts the full shape too
            size = size[2:]
        if len(size) != nd:
            raise ValueError(f"{layer}: output_size must have {nd} or {nd + 2} entries, got "
                             f"{tuple(output_size)}")
        spatial = x.shape[x.ndim - nd:]  # batched or not
        smallest = [(spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(nd)]
        for d in range(nd):
            if not smallest[d] <= size[d] < smallest[d] + self.stride[d]:
                raise ValueError(f"{layer}: output_size {size} is not reachable from input "
                                 f"{x.shape}: axis {d} can be {smallest[d]} to "
                                 f"{smallest[d] + self.stride[d] - 1}")
        return tuple(s - m for s, m in zip(size, smallest))


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution (a strided one's adjoint) with an ``[in, out/groups, k]``
    weight:

        up = ConvTranspose1d(32, 16, 4, stride=2, padding=1)    # [N, 32, L] -> [N, 16, 2L]
    """

    _nd = 1
    function = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution with an ``[in, out/groups, kh, kw]`` weight:

        up = ConvTranspose2d(64, 32, 2, stride=2)               # [N, 64, H, W] -> [.., 2H, 2W]
    """

    _nd = 2
    function = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution with an ``[in, out/groups, kd, kh, kw]`` weight."""

    _nd = 3
    function = staticmethod(F.conv_transpose3d)


class _BatchNorm(Module):
    """Batch norm over every axis but the channels. In training the batch statistics are
    used, the running ones updated (``(1 - momentum) * running + momentum * batch``, or
    with ``momentum=None`` the cumulative average ``running + (batch - running) / count``)
    and ``num_batches_tracked``, PyTorch's int64 counter of training batches, incremented;
    in evaluation the running ones are used, or the batch's with
    ``track_running_stats=False`` (which keeps none, and no counter). ``affine=False`` has no
    ``weight`` and ``bias``, ``bias=False`` no ``bias``.

        bn = BatchNorm1d(16, momentum=None)       # running stats: the mean over all batches
    """

    _optional_state = ("num_batches_tracked",)
    _ranks: tuple[int, ...]  # the input ranks accepted
    data_format: str | None = None  # the 2-d layer's layout option

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 device: str | None = None, *, bias: bool = True) -> None:
        _check_sizes(type(self).__name__, num_features=num_features)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        floating = default_float()
        ones, zeros = np.ones(num_features, floating), np.zeros(num_features, floating)
        self.weight = self.bias = self.running_mean = self.running_var = None
        self.num_batches_tracked = None
        if affine:
            self.weight = Parameter(tensor(ones, device=device))
            if bias:
                self.bias = Parameter(tensor(zeros, device=device))
        if track_running_stats:
            self.running_mean = tensor(zeros, device=device)
            self.running_var = tensor(ones, device=device)
            self.num_batches_tracked = tensor(np.array(0, np.int64), device=device)

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1 and ``num_batches_tracked`` 0, in place, as
        PyTorch's (what ``swa_utils.update_bn`` does before re-estimating them)."""
        if self.running_mean is not None:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """:meth:`reset_running_stats`, and the affine weight 1 and bias 0."""
        self.reset_running_stats()
        with no_grad():
            if self.weight is not None:
                self.weight.fill_(1.0)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self._ranks:
            ranks = " or ".join(f"{r}D" for r in self._ranks)
            raise ValueError(f"{type(self).__name__}: expected {ranks} input (got {x.ndim}D "
                             "input)")
        data_format = "NHWC" if self.data_format == "NHWC" else "NCHW"
        batch_statistics = self.training or self.running_mean is None
        # The cumulative average's weight, 1 / count, is only known on the device: take the
        # batch's statistics alone (momentum 1) and blend them below.
        momentum = 1.0 if self.momentum is None else self.momentum
        result = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              batch_statistics, momentum, self.eps, data_format)
        if not batch_statistics:
            return result
        y, mean, var = result
        if self.training and self.running_mean is not None:
            count = self.num_batches_tracked + 1
            if self.momentum is None:
                with no_grad():
                    weight = 1.0 / count.astype(self.running_mean.dtype)
                    mean = self.running_mean + (mean - self.running_mean) * weight
                    var = self.running_var + (var - self.running_var) * weight
            assign_all([(self.running_mean, mean), (self.running_var, var),
                        (self.num_batches_tracked, count)])
        return y

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}"
                f"{_format_repr(self.data_format)}")


class BatchNorm1d(_BatchNorm):
    """Batch norm of ``[N, C]`` or ``[N, C, L]`` data per channel (see :class:`_BatchNorm`):

        bn = BatchNorm1d(128)                                    # [N, 128] -> same
    """

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of ``[N, C, H, W]`` data per channel (see :class:`_BatchNorm`);
    ``data_format="NHWC"``: the channels are the last axis.

        bn = BatchNorm2d(64, data_format="NHWC")                 # [N, H, W, 64] -> same
    """

    _ranks = (4,)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 device: str | None = None, *, bias: bool = True,
                 data_format: str = "NCHW") -> None:
        self.data_format = _image_format("BatchNorm2d", data_format)
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         bias=bias)


class BatchNorm3d(_BatchNorm):
    """Batch norm of ``[N, C, D, H, W]`` data per channel (see :class:`_BatchNorm`)."""

    _ranks = (5,)


class SyncBatchNorm(_BatchNorm):
    """``torch.nn.SyncBatchNorm`` in one process: batch norm of ``[N, C, ...]`` data of any
    rank from 2 (see :class:`_BatchNorm`), its statistics the batch's own. PyTorch
    synchronises them across the processes of a distributed run; gingham runs one process
    per model (:class:`gingham.nn.DataParallel` splits a batch over devices in it), so there
    are no peers to combine with, as in PyTorch when no process group is initialised.
    :meth:`convert_sync_batchnorm` swaps a model's batch norm layers for these, as DDP
    scripts do:

        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    """

    _ranks = range(2, 64)  # [N, C] and any number of spatial dims, as PyTorch's

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device: str | None = None, dtype=None) -> None:
        _one_process("SyncBatchNorm", process_group)
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device)
        if dtype is not None:
            self.to(dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {x.ndim}D input)")
        return super().forward(x)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every batch norm layer in it (``BatchNorm1d``/``2d``/``3d``; not
        instance norm) replaced by a :class:`SyncBatchNorm` holding the same parameters and
        running statistics (the same tensors) and training mode, as PyTorch's; a batch norm
        ``module`` itself is returned converted.

            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        """
        _one_process("convert_sync_batchnorm", process_group)
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, (_InstanceNorm, cls)):
            converted = cls._converted(module)
        for name, child in list(module.named_children()):
            replacement = cls.convert_sync_batchnorm(child)
            if replacement is not child:
                _replace_child(converted, name, replacement)
        return converted

    @classmethod
    def _converted(cls, norm: "_BatchNorm") -> "SyncBatchNorm":
        held = next((t for t in (norm.weight, norm.running_mean) if t is not None), None)
        converted = cls(norm.num_features, norm.eps, norm.momentum, norm.affine,
                        norm.track_running_stats, device=None if held is None else held.device)
        # the same tensors, as PyTorch's: an optimiser made before still updates them
        for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
            setattr(converted, name, getattr(norm, name))
        converted.data_format = norm.data_format
        converted.train(norm.training)
        return converted


def _one_process(op: str, process_group) -> None:
    if process_group is not None:
        raise ValueError(f"{op}: gingham runs a model in one process, so there is no process "
                         f"group to synchronise over; pass process_group=None, not "
                         f"{process_group!r}")


def _replace_child(module: Module, name: str, child: Module) -> None:
    """Put ``child`` where :meth:`Module.named_children` found ``name`` (an attribute, a
    container's entry, or ``attr.index`` of a list or tuple attribute)."""
    attribute, _, index = name.partition(".")
    if not index or isinstance(module, (Sequential, ModuleList, ModuleDict)):
        module.add_module(name, child)
        return
    items = getattr(module, attribute)
    replaced = list(items)
    replaced[int(index)] = child
    setattr(module, attribute, replaced if isinstance(items, list) else tuple(replaced))


class GroupNorm(Module):
    """Normalise ``[N, C, ...]`` data over groups of ``num_channels / num_groups`` channels
    (:func:`F.group_norm`), then scale and shift per channel by ``weight`` (ones) and
    ``bias`` (zeros), which ``affine=False`` leaves out (``bias=False``: no shift):

        norm = GroupNorm(8, 64)                                  # [N, 64, H, W] -> same
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: str | None = None, *, bias: bool = True) -> None:
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by "
                             f"num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        self.weight = self.bias = None
        if affine:
            ones = np.ones(num_channels, default_float())
            self.weight = Parameter(tensor(ones, device=device))
            if bias:
                self.bias = Parameter(tensor(np.zeros_like(ones), device=device))

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` axes, then scale by ``weight`` (ones)
    and shift by ``bias`` (zeros), both of that shape; ``elementwise_affine=False`` has
    neither, ``bias=False`` no shift.

        norm = LayerNorm(512)                                    # [batch, tokens, 512] -> same
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: str | None = None) -> None:
        shape = ((normalized_shape,) if isinstance(normalized_shape, (int, np.integer))
                 else tuple(normalized_shape))
        _check_sizes(type(self).__name__,
                     **{f"normalized_shape[{i}]": size for i, size in enumerate(shape)})
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = self.bias = None
        if elementwise_affine:
            ones = np.ones(self.normalized_shape, default_float())
            self.weight = Parameter(tensor(ones, device=device))
            if bias:
                self.bias = Parameter(tensor(np.zeros_like(ones), device=device))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """Divide by the root mean square over the trailing ``normalized_shape`` axes
    (:func:`F.rms_norm`), then scale by ``weight`` (ones) of that shape, which
    ``elementwise_affine=False`` leaves out; ``eps=None`` is the dtype's machine epsilon, as
    in PyTorch:

        norm = RMSNorm(512)                                      # [batch, tokens, 512] -> same
    """

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device: str | None = None) -> None:
        shape = ((normalized_shape,) if isinstance(normalized_shape, (int, np.integer))
                 else tuple(normalized_shape))
        _check_sizes(type(self).__name__,
                     **{f"normalized_shape[{i}]": size for i, size in enumerate(shape)})
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = None
        if elementwise_affine:
            ones = np.ones(self.normalized_shape, default_float())
            self.weight = Parameter(tensor(ones, device=device))

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """AlexNet's normalisation across the channels of ``[N, C, ...]`` data
    (:func:`F.local_response_norm`): ``x / (k + alpha * mean of x^2 over size channels)^beta``.

        norm = LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x: Tensor) -> Tensor:
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class Embedding(Module):
    """A lookup table: integer indices of any shape pick rows of a ``[num_embeddings,
    embedding_dim]`` weight, initialised N(0, 1) as in PyTorch (an index outside the table
    raises ``IndexRangeError`` where the host knows the indices, and otherwise gives a zero
    row: :func:`F.embedding`).

    ``padding_idx`` (negative: counted from the end) names a row initialised to zeros whose
    gradient is always zero, so training never changes it (a padding token's vector).
    ``max_norm``: each forward first scales, in place, the rows it looks up whose
    ``norm_type``-norm exceeds ``max_norm`` down to that norm, as PyTorch's. ``sparse`` is
    accepted and ignored (gradients are dense, of the same value); ``scale_grad_by_freq`` is
    not supported.

        embed = Embedding(30000, 512, padding_idx=0)             # [batch, tokens] -> [.., 512]
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False,
                 device: str | None = None) -> None:
        if scale_grad_by_freq:
            raise NotImplementedError("Embedding: scale_grad_by_freq is not supported")
        _check_sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = F._padding_index(padding_idx, num_embeddings)
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is not None:  # from_pretrained: the given values, padding row included
            if _weight.shape != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: shape of weight {_weight.shape} does not match "
                                 f"num_embeddings and embedding_dim "
                                 f"({num_embeddings}, {embedding_dim})")
            given = tensor(_weight, device=device or getattr(_weight, "device", None))
            self.weight = Parameter(given, requires_grad=not _freeze)
            return
        values = _default_rng.standard_normal((num_embeddings, embedding_dim))
        if self.padding_idx is not None:
            values[self.padding_idx] = 0.0
        self.weight = Parameter(tensor(values.astype(default_float()), device=device),
                                requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, sparse: bool = False) -> "Embedding":
        """An embedding holding a copy of ``embeddings`` (a 2-d tensor or array; its device
        and dtype), frozen (a parameter with ``requires_grad=False``) unless ``freeze=False``. As
        in PyTorch the padding row keeps its given values; its gradient is zero.

            embed = Embedding.from_pretrained(glove_vectors, freeze=False, padding_idx=0)
        """
        if not isinstance(embeddings, Tensor):
            embeddings = tensor(np.asarray(embeddings))
        if embeddings.ndim != 2:
            raise ValueError(f"Embeddings parameter is expected to be 2-dimensional, got shape "
                             f"{embeddings.shape}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        text += f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        text += f", max_norm={self.max_norm}" if self.max_norm is not None else ""
        text += f", norm_type={self.norm_type}" if self.norm_type != 2 else ""
        return text + (", sparse=True" if self.sparse else "")


class Dropout(Module):
    """In training, zero each element with probability ``p`` and scale the others by
    ``1 / (1 - p)``; in evaluation (``model.eval()``) the identity. The mask comes from the
    device's default generator (:func:`gingham.nn.manual_seed` reseeds it;
    :func:`gingham.nn.get_rng_state` and :func:`gingham.nn.set_rng_state` save and restore it
    with a checkpoint); inside ``gingham.jit`` every replay draws a fresh one.

        drop = Dropout(0.1)
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


# -- activations -----------------------------------------------------------------------------------


class Identity(Module):
    """Returns its input; takes and ignores any arguments, as PyTorch's."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def forward(self, x: Tensor) -> Tensor:
        return x


class _InplaceActivation(Module):
    """An activation whose only setting is PyTorch's ``inplace``: ``True`` writes the value
    into the input and returns it, as PyTorch's (the ``inplace`` of :mod:`F`'s activations).

        features = ReLU(inplace=True)(features)      # the same tensor, rectified
    """

    function: Callable[[Tensor], Tensor]

    def __init__(self, inplace: bool = False) -> None:
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return type(self).function(x, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ReLU(_InplaceActivation):
    """``max(x, 0)``."""

    function = staticmethod(F.relu)


class LeakyReLU(Module):
    """``x`` where positive, ``negative_slope * x`` elsewhere."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return ", ".join(filter(None, [f"negative_slope={self.negative_slope}",
                                       _inplace_repr(self.inplace)]))


class ELU(Module):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return ", ".join(filter(None, [f"alpha={self.alpha}", _inplace_repr(self.inplace)]))


class GELU(Module):
    """``x * Phi(x)``, exactly (``approximate="none"``) or by PyTorch's ``"tanh"`` formula."""

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', not {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_InplaceActivation):
    """``x * sigmoid(x)`` (swish)."""

    function = staticmethod(F.silu)


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        if max_val <= min_val:
            raise ValueError(f"{type(self).__name__}: max_val {max_val} must be greater than "
                             f"min_val {min_val}")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"min_val={self.min_val}, max_val={self.max_val}{inplace}"


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, and ``x`` where ``beta * x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``."""

    function = staticmethod(F.mish)


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6``."""

    function = staticmethod(F.hardswish)

    def extra_repr(self) -> str:
        return ""  # PyTorch's Hardswish does not show inplace


class PReLU(Module):
    """:class:`LeakyReLU` with a learnt slope: ``weight`` holds ``num_parameters`` slopes
    (1, shared, or one per channel, axis 1), initialised to ``init``.

        act = PReLU(64)                                          # [N, 64, H, W] -> same
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25,
                 device: str | None = None) -> None:
        self.num_parameters = num_parameters
        values = np.full(num_parameters, init, default_float())
        self.weight = Parameter(tensor(values, device=device))

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


def _implicit_dim(layer: str, ndim: int) -> int:
    """PyTorch's legacy choice of axis for a softmax made without ``dim`` (with its warning)."""
    warnings.warn(f"{layer}: give dim explicitly; without it the axis is 0 for 0-, 1- and 3-d "
                  "input and 1 otherwise, as in PyTorch", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class _AlongDim(Module):
    """A normalisation along one axis, ``dim`` (PyTorch's implicit choice where None)."""

    function: Callable[[Tensor, int], Tensor]

    def __init__(self, dim: int | None = None) -> None:
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        dim = self.dim if self.dim is not None else _implicit_dim(type(self).__name__, x.ndim)
        return type(self).function(x, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """``exp(x) / sum(exp(x))`` along ``dim``.

        probs = Softmax(dim=-1)(logits)
    """

    function = staticmethod(F.softmax)


class LogSoftmax(_AlongDim):
    """``log(softmax(x))`` along ``dim``, computed stably."""

    function = staticmethod(F.log_softmax)


# -- pooling and reshaping -------------------------------------------------------------------------


class _MaxPoolNd(Module):
    """Max over ``kernel_size`` windows (``stride`` defaults to the kernel), with PyTorch's
    ``padding`` (padded taps never win), ``dilation`` and ``ceil_mode``;
    ``return_indices=True`` returns ``(values, indices)``, PyTorch's int64 positions of the
    maxima in each plane."""

    function: Callable[..., Tensor]

    data_format: str | None = None  # the 2-d layer's layout option

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return type(self).function(x, self.kernel_size, self.stride, self.padding, self.dilation,
                                   self.ceil_mode, self.return_indices,
                                   **_layout(self.data_format))

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
                f"{_format_repr(self.data_format)}")


class MaxPool1d(_MaxPoolNd):
    """Max over windows of ``[N, C, L]`` data: ``MaxPool1d(2)`` halves ``L``."""

    function = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Max over windows of ``[N, C, H, W]`` data, or NHWC with ``data_format="NHWC"``:

        pool = MaxPool2d(3, stride=2, padding=1)                 # [N, C, 32, 32] -> [.., 16, 16]
    """

    function = staticmethod(F.max_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False,
                 data_format: str = "NCHW") -> None:
        super().__init__(kernel_size, stride, padding, dilation, return_indices, ceil_mode)
        self.data_format = _image_format("MaxPool2d", data_format)


class MaxPool3d(_MaxPoolNd):
    """Max over windows of ``[N, C, D, H, W]`` data."""

    function = staticmethod(F.max_pool3d)


class _MaxUnpoolNd(Module):
    """The partial inverse of a max pool (:func:`F.max_unpool2d`):
    ``forward(input, indices, output_size=None)``. Settings are kept as tuples, as
    PyTorch's; windows must not overlap (``stride >= kernel_size``).

        pool, unpool = MaxPool2d(2, return_indices=True), MaxUnpool2d(2)
        values, indices = pool(x)
        restored = unpool(values, indices, output_size=x.shape)
    """

    _nd: int
    function: Callable[..., Tensor]

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        layer, nd = type(self).__name__, self._nd
        self.kernel_size = F._ntuple(layer, "kernel_size", kernel_size, nd)
        self.stride = (self.kernel_size if stride is None
                       else F._ntuple(layer, "stride", stride, nd))
        self.padding = F._ntuple(layer, "padding", padding, nd)

    def forward(self, input: Tensor, indices: Tensor,
                output_size: Sequence[int] | None = None) -> Tensor:
        return type(self).function(input, indices, self.kernel_size, self.stride, self.padding,
                                   output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    _nd = 1
    function = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    _nd = 2
    function = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    _nd = 3
    function = staticmethod(F.max_unpool3d)


class AvgPool1d(Module):
    """Mean over windows of ``[N, C, L]`` data (``stride`` defaults to the kernel);
    ``count_include_pad=False`` divides each window by its taps inside the input. Settings
    are kept as 1-tuples, as PyTorch's are.

        pool = AvgPool1d(3, stride=2, padding=1)                 # [N, C, 32] -> [N, C, 16]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        self.kernel_size = F._ntuple("AvgPool1d", "kernel_size", kernel_size, 1)
        self.stride = (self.kernel_size if stride is None
                       else F._ntuple("AvgPool1d", "stride", stride, 1))
        self.padding = F._ntuple("AvgPool1d", "padding", padding, 1)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    """Mean over ``kernel_size`` windows (``stride`` defaults to the kernel);
    ``count_include_pad=False`` divides each window by its taps inside the input,
    ``divisor_override`` by that number."""

    function: Callable[..., Tensor]
    data_format: str | None = None  # the 2-d layer's layout option

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return type(self).function(x, self.kernel_size, self.stride, self.padding,
                                   self.ceil_mode, self.count_include_pad,
                                   self.divisor_override, **_layout(self.data_format))

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}{_format_repr(self.data_format)}")


class AvgPool2d(_AvgPoolNd):
    """Mean over windows of ``[N, C, H, W]`` data, or NHWC with ``data_format="NHWC"``:

        pool = AvgPool2d(3, stride=2, padding=1)                 # [N, C, 32, 32] -> [.., 16, 16]
    """

    function = staticmethod(F.avg_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None,
                 data_format: str = "NCHW") -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override)
        self.data_format = _image_format("AvgPool2d", data_format)


class AvgPool3d(_AvgPoolNd):
    """Mean over windows of ``[N, C, D, H, W]`` data."""

    function = staticmethod(F.avg_pool3d)


class _AdaptivePoolNd(Module):
    """Pooling to ``output_size`` (an int, or one per axis; ``None`` keeps that axis), over
    PyTorch's adaptive windows."""

    function: Callable[..., Tensor]

    def __init__(self, output_size) -> None:
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return type(self).function(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """Average pooling of ``[N, C, L]`` data to ``output_size`` values."""

    function = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """Average pooling to ``output_size`` (1: global average pooling), either layout."""

    def __init__(self, output_size, data_format: str = "NCHW") -> None:
        self.output_size = output_size
        self.data_format = _image_format("AdaptiveAvgPool2d", data_format)

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size, self.data_format)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}{_format_repr(self.data_format)}"


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    """Average pooling of ``[N, C, D, H, W]`` data to ``output_size``."""

    function = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    """Max pooling to ``output_size``; ``return_indices=True`` is not supported."""

    def __init__(self, output_size, return_indices: bool = False) -> None:
        if return_indices:
            raise NotImplementedError(f"{type(self).__name__}: return_indices=True is not "
                                      "supported")
        self.output_size, self.return_indices = output_size, return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max pooling of ``[N, C, L]`` data to ``output_size`` values."""

    function = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling of ``[N, C, H, W]`` data to ``output_size``:

        pool = AdaptiveMaxPool2d((7, 7))                         # [N, C, H, W] -> [.., 7, 7]
    """

    function = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling of ``[N, C, D, H, W]`` data to ``output_size``."""

    function = staticmethod(F.adaptive_max_pool3d)


class FractionalMaxPool2d(Module):
    """Fractional max pooling of ``[N, C, H, W]`` data (:func:`F.fractional_max_pool2d`):
    ``kernel_size`` windows at positions drawn afresh at each call (from the default
    generator) that give ``output_size``, or ``int(H * output_ratio)`` by
    ``int(W * output_ratio)``, outputs.

        pool = FractionalMaxPool2d(3, output_ratio=0.5)          # [N, C, 32, 32] -> 16 x 16
    """

    def __init__(self, kernel_size, output_size=None, output_ratio=None,
                 return_indices: bool = False, _random_samples: Tensor | None = None) -> None:
        if output_size is None and output_ratio is None:
            raise ValueError("FractionalMaxPool2d requires specifying either an output size, "
                             "or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if output_ratio is not None:
            ratios = (output_ratio,) * 2 if isinstance(output_ratio, (int, float)) \
                else tuple(output_ratio)
            if not all(0 < r < 1 for r in ratios):
                raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
            output_ratio = ratios
        if return_indices:
            raise NotImplementedError("FractionalMaxPool2d: return_indices=True is not "
                                      "supported")
        self.kernel_size, self.output_size = kernel_size, output_size
        self.output_ratio, self.return_indices = output_ratio, return_indices
        self.register_buffer("_random_samples", _random_samples)  # a buffer, as PyTorch's

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        return F.fractional_max_pool2d(input, self.kernel_size, self.output_size,
                                       self.output_ratio, self.return_indices,
                                       _random_samples=self._random_samples)


class Upsample(Module):
    """Resize the spatial axes of ``[N, C, ...]`` data to ``size`` or by ``scale_factor``
    (:func:`F.interpolate`: ``"nearest"``, or ``"linear"``/``"bilinear"``/``"trilinear"``):

        up = Upsample(scale_factor=2, mode="bilinear")           # [N, C, H, W] -> [.., 2H, 2W]
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor is not None else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            return f"scale_factor={self.scale_factor!r}, mode={self.mode!r}"
        return f"size={self.size!r}, mode={self.mode!r}"


class Flatten(Module):
    """Dims ``start_dim`` to ``end_dim`` merged into one (:meth:`Tensor.flatten`); by default
    ``[N, ...] -> [N, features]``, the features in PyTorch's NCHW order in either layout.

    With ``data_format="NHWC"`` (keyword only) a 4-d input is read as ``[N, H, W, C]`` and
    flattened as its NCHW twin would be, so a following :class:`Linear` holds the same
    weights as PyTorch's (a transposing copy, unless H = W = 1, as after global pooling,
    where it is a reshape).

        Flatten()(x)                                 # [N, C, H, W] -> [N, C * H * W]
        Flatten(0, 1)(x)                             # [N, C, H, W] -> [N * C, H, W]
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1, *,
                 data_format: str = "NCHW") -> None:
        for name, value in (("start_dim", start_dim), ("end_dim", end_dim)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"Flatten: {name} must be an int, not {value!r} (give "
                                f"data_format by keyword)")
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)
        self.data_format = _image_format("Flatten", data_format)

    def forward(self, x: Tensor) -> Tensor:
        if self.data_format == "NHWC" and x.ndim == 4:
            start, end = self.start_dim % 4, self.end_dim % 4
            # Merging all of C, H and W where H = W = 1 reads the same in either order.
            if not (start <= 1 and end == 3 and x.shape[1] * x.shape[2] == 1):
                x = x.transpose(0, 3, 1, 2)
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return (f"start_dim={self.start_dim}, end_dim={self.end_dim}"
                f"{_format_repr(self.data_format)}")


class Unflatten(Module):
    """Dim ``dim`` split into ``unflattened_size`` (one entry may be -1), the inverse of
    :class:`Flatten` (:meth:`Tensor.unflatten`):

        Unflatten(1, (16, 4, 4))(x)                  # [N, 256] -> [N, 16, 4, 4]
    """

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple or list of ints, "
                            f"not {type(unflattened_size).__name__}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, x: Tensor) -> Tensor:
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class PixelShuffle(Module):
    """``[*, C * r^2, H, W] -> [*, C, H * r, W * r]`` (:func:`F.pixel_shuffle`), ESPCN's
    sub-pixel upsampling:

        up = nn.Sequential(nn.Conv2d(64, 3 * 4, 3, padding=1), nn.PixelShuffle(2))
    """

    def __init__(self, upscale_factor: int) -> None:
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``[*, C, H * r, W * r] -> [*, C * r^2, H, W]`` (:func:`F.pixel_unshuffle`), the
    inverse of :class:`PixelShuffle`:

        PixelUnshuffle(2)(x)                         # [1, 3, 8, 8] -> [1, 12, 4, 4]
    """

    def __init__(self, downscale_factor: int) -> None:
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class Unfold(Module):
    """Sliding ``kernel_size`` patches of ``[N, C, H, W]`` data as columns
    ``[N, C * kh * kw, L]`` (im2col, :func:`F.unfold`):

        cols = Unfold(kernel_size=3, padding=1)(x)   # [2, 4, 5, 5] -> [2, 36, 25]
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, x: Tensor) -> Tensor:
        return F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Columns ``[N, C * kh * kw, L]`` summed back into ``[N, C, *output_size]`` (col2im,
    :func:`F.fold`), the adjoint of :class:`Unfold`; overlapping patches add up:

        x = Fold(output_size=(5, 5), kernel_size=3, padding=1)(cols)   # [2, 36, 25] -> [2, 4, 5, 5]
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, x: Tensor) -> Tensor:
        return F.fold(x, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class CosineSimilarity(Module):
    """:func:`F.cosine_similarity` of two inputs along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


# -- losses ----------------------------------------------------------------------------------------


class _Loss(Module):
    """A loss as a module: ``forward(input, target)`` calls its functional form with the
    settings given when it was made. ``size_average`` and ``reduce`` are PyTorch's
    deprecated spelling of ``reduction`` (either given overrides it, with a warning). A
    class-weight tensor given to the constructor is a buffer named as PyTorch names it
    (``weight``, ``pos_weight``), so state dicts match.

        criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
        loss = criterion(logits, labels)
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        self.reduction = F._legacy_reduction(type(self).__name__, size_average, reduce,
                                             reduction)


class L1Loss(_Loss):
    """Mean (``reduction``) absolute difference: :func:`F.l1_loss`."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean (``reduction``) squared difference: :func:`F.mse_loss`."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """:func:`F.smooth_l1_loss`: squared below ``beta``, absolute above."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """:func:`F.huber_loss`: squared below ``delta``, ``delta`` times absolute above."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """:func:`F.kl_div` (``input``: log-probabilities; ``reduction="batchmean"`` is the
    divergence's definition)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_Loss):
    """:func:`F.binary_cross_entropy` of probabilities, optionally weighted per element."""

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """:func:`F.binary_cross_entropy_with_logits`, with ``weight`` and ``pos_weight``."""

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean", pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                  self.pos_weight)


class NLLLoss(_Loss):
    """:func:`F.nll_loss` of log-probabilities against class indices."""

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
                 reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    """:func:`F.cross_entropy` of logits against class indices or probabilities."""

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100,
                 reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index = weight, ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)


# -- containers ------------------------------------------------------------------------------------


def _checked_module(container: str, value: Any) -> Module:
    if not isinstance(value, Module):
        raise TypeError(f"{container} holds gingham.nn Modules, not {type(value).__name__}")
    return value


def _checked_name(container: str, name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{container}: module names are strings, not {type(name).__name__}")
    if not name or "." in name:
        raise KeyError(f"{container}: module name {name!r} must be non-empty and contain no '.' "
                       "(dots separate the parts of a state-dict name)")
    return name


class _ModuleSequence(Module):
    """What :class:`ModuleList` and :class:`Sequential` share: modules in a list, ``layers``,
    named by position."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        self.layers: list[Module] = []
        self.extend(modules)

    def named_children(self) -> Iterator[tuple[str, Module]]:
        return zip(self._child_names(), self.layers)

    def _child_names(self) -> list[str]:
        return [str(i) for i in range(len(self.layers))]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.layers)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(self.layers[index])
        return self.layers[index]

    def __setitem__(self, index: int, module: Module) -> None:
        self.layers[index] = _checked_module(type(self).__name__, module)

    def __delitem__(self, index) -> None:
        del self.layers[index]

    def append(self, module: Module):
        self.layers.append(_checked_module(type(self).__name__, module))
        return self

    def extend(self, modules: Iterable[Module]):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        self.layers.insert(index, _checked_module(type(self).__name__, module))

    def add_module(self, name: str, module: Module) -> None:
        """The child ``name`` becomes ``module``: an existing name is replaced, the next
        position (``str(len(self))``) appended, as in PyTorch's containers."""
        module = _checked_module(type(self).__name__, module)
        names = self._child_names()
        if name in names:
            self.layers[names.index(name)] = module
        elif name == str(len(self.layers)):
            self.append(module)
        else:
            self._add_named(_checked_name(type(self).__name__, name), module)

    def _add_named(self, name: str, module: Module) -> None:
        raise KeyError(f"{type(self).__name__}.add_module: a child is named by its position "
                       f"('0' to '{len(self.layers)}'), not {name!r}")


class ModuleList(_ModuleSequence):
    """A list of modules, named ``0``, ``1``, ... in the state dict (as PyTorch's). It has no
    ``forward``: the owner calls its modules.

        self.blocks = ModuleList(Block(64) for _ in range(4))
        for block in self.blocks:
            x = block(x)

    A plain list attribute of modules works the same way (``blocks.0.weight``, ...).
    """

    def __repr__(self) -> str:
        """PyTorch's: runs of equal modules shown once, as ``(0-3): 4 x Block(...)``."""
        runs: list[list] = []  # [first index, last index, repr]
        for index, module in enumerate(self.layers):
            text = repr(module)
            if runs and runs[-1][2] == text:
                runs[-1][1] = index
            else:
                runs.append([index, index, text])
        if not runs:
            return f"{type(self).__name__}()"
        lines = [f"({first}): {text}" if first == last else
                 f"({first}-{last}): {last - first + 1} x {text}" for first, last, text in runs]
        return (f"{type(self).__name__}(\n  "
                + "\n  ".join(_add_indent(line, 2) for line in lines) + "\n)")


class Sequential(_ModuleSequence):
    """Modules applied in order, named ``0``, ``1``, ... as in PyTorch (or by the keys of an
    ``OrderedDict`` given as the only argument), so a PyTorch ``nn.Sequential``'s state dict
    loads unchanged:

        model = Sequential(Conv2d(3, 8, 3), ReLU(), Flatten(), Linear(8 * 30 * 30, 10))
        model.load_state_dict(torch_twin.state_dict())      # keys '0.weight', '3.bias', ...
    """

    def __init__(self, *layers) -> None:
        self._names: list[str] | None = None  # None: by position
        names = None
        if len(layers) == 1 and isinstance(layers[0], Mapping):
            names = [_checked_name("Sequential", name) for name in layers[0]]
            layers = tuple(layers[0].values())
        super().__init__(layers)
        self._names = names

    def _child_names(self) -> list[str]:
        if self._names is not None and len(self._names) == len(self.layers):
            return self._names
        return super()._child_names()

    # PyTorch keeps a Sequential's children in ``_modules``, so each is an attribute by its
    # name (``model.fc``, ``getattr(model, "0")``), and setting a module attribute replaces
    # or appends a child: ``model.fc = nn.Linear(512, 3)`` swaps the head of a named one.
    def __getattr__(self, name: str):
        layers = self.__dict__.get("layers")  # absent while __init__ runs
        if layers is not None and name in self._child_names():
            return layers[self._child_names().index(name)]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, Module) and "layers" in self.__dict__:
            self.add_module(name, value)
        else:
            super().__setattr__(name, value)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index):
        if isinstance(index, slice):  # keeps the names, as PyTorch's slices do
            return Sequential(OrderedDict(zip(self._child_names()[index], self.layers[index])))
        return self.layers[index]

    def append(self, module: Module) -> "Sequential":
        if self._names is not None:
            self._names.append(str(len(self.layers)))
        super().append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        self._names = None  # renumbered, as PyTorch renumbers
        super().insert(index, module)

    def __delitem__(self, index) -> None:
        self._names = None
        super().__delitem__(index)

    def _add_named(self, name: str, module: Module) -> None:
        """A new named child at the end (PyTorch's ``Sequential.add_module("fc", ...)``)."""
        self._names = self._child_names() + [name]
        self.layers.append(module)


class ModuleDict(Module):
    """Modules by name (the names of their state-dict entries), in insertion order:

        self.heads = ModuleDict({"class": Linear(512, 10), "box": Linear(512, 4)})
        outputs = {name: head(features) for name, head in self.heads.items()}
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None
                 ) -> None:
        self.entries: dict[str, Module] = {}
        if modules is not None:
            self.update(modules)

    def named_children(self) -> Iterator[tuple[str, Module]]:
        return iter(list(self.entries.items()))

    def __getitem__(self, key: str) -> Module:
        return self.entries[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.entries[_checked_name("ModuleDict", key)] = _checked_module("ModuleDict", module)

    def add_module(self, name: str, module: Module) -> None:
        self[name] = module

    def __delitem__(self, key: str) -> None:
        del self.entries[key]

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def keys(self):
        return self.entries.keys()

    def values(self):
        return self.entries.values()

    def items(self):
        return self.entries.items()

    def pop(self, key: str) -> Module:
        return self.entries.pop(key)

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module


# --- activations, losses, normalisation, padding and containers (torch.nn names) ---


class Hardsigmoid(_InplaceActivation):
    """``relu6(x + 3) / 6``."""

    function = staticmethod(F.hardsigmoid)

    def extra_repr(self) -> str:
        return ""  # PyTorch's Hardsigmoid does not show inplace


class SELU(_InplaceActivation):
    """``scale * elu(x, alpha)`` with the self-normalising constants (:func:`F.selu`)."""

    function = staticmethod(F.selu)


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.celu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softsign(x)


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed stably."""

    def forward(self, x: Tensor) -> Tensor:
        return F.logsigmoid(x)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanhshrink(x)


class GLU(Module):
    """The gated linear unit along ``dim``: first half times ``sigmoid`` of the second.

        glu = GLU(dim=1)                                         # [N, 2C, L] -> [N, C, L]
    """

    def __init__(self, dim: int = -1) -> None:
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(_AlongDim):
    """``softmax(-x)`` along ``dim``.

        weights = Softmin(dim=-1)(distances)
    """

    function = staticmethod(F.softmin)


class Softshrink(Module):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between."""

    def __init__(self, lambd: float = 0.5) -> None:
        self.lambd = lambd

    def forward(self, x: Tensor) -> Tensor:
        return F.softshrink(x, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """``x`` where ``|x| > lambd``, 0 elsewhere."""

    def forward(self, x: Tensor) -> Tensor:
        return F.hardshrink(x, self.lambd)


class Threshold(Module):
    """``x`` where ``x > threshold``, ``value`` elsewhere.

        act = Threshold(0.1, 20.0)
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"threshold={self.threshold}, value={self.value}{inplace}"


class PairwiseDistance(Module):
    """:func:`F.pairwise_distance` of two inputs along their last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class MarginRankingLoss(_Loss):
    """:func:`F.margin_ranking_loss`, ``forward(input1, input2, target)``."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """:func:`F.triplet_margin_loss`, ``forward(anchor, positive, negative)``."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                     self.swap, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """:func:`F.cosine_embedding_loss`, ``forward(input1, input2, target)``."""

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """:func:`F.hinge_embedding_loss`."""

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class CTCLoss(_Loss):
    """:func:`F.ctc_loss`: ``forward(log_probs, targets, input_lengths, target_lengths)``.

        criterion = nn.CTCLoss(blank=0, zero_infinity=True)
        loss = criterion(log_probs, targets, input_lengths, target_lengths)
    """

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths,
                target_lengths) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


class PoissonNLLLoss(_Loss):
    """:func:`F.poisson_nll_loss`."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """:func:`F.gaussian_nll_loss`, ``forward(input, target, var)``."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class SoftMarginLoss(_Loss):
    """:func:`F.soft_margin_loss`."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """:func:`F.multilabel_soft_margin_loss`; ``weight`` (per class) is a buffer."""

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_Loss):
    """:func:`F.multi_margin_loss`; ``weight`` (per class) is a buffer."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be 1-d, got shape {weight.shape}")
        self.p, self.margin, self.weight = p, margin, weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(input, target, self.p, self.margin, self.weight,
                                   reduction=self.reduction)


class _InstanceNorm(_BatchNorm):
    """Instance norm (:func:`F.instance_norm`): each sample's channels normalised over their
    own spatial axes. PyTorch's defaults: no affine parameters and no running statistics;
    with ``track_running_stats`` training updates them (``num_batches_tracked`` is kept for
    the state dict but, as in PyTorch, not counted) and evaluation uses them.

        norm = InstanceNorm2d(64, affine=True)                   # [N, 64, H, W] -> same
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False,
                 device: str | None = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self._ranks:
            raise ValueError(f"{type(self).__name__}: expected {self._ranks[0]}D or "
                             f"{self._ranks[1]}D input (got {x.ndim}D input)")
        unbatched = x.ndim == self._ranks[0]
        batch = x.unsqueeze(0) if unbatched else x
        use_input_stats = self.training or not self.track_running_stats
        result = F.instance_norm(batch, self.running_mean, self.running_var, self.weight,
                                 self.bias, use_input_stats,
                                 self.momentum if self.momentum is not None else 0.0, self.eps)
        if isinstance(result, tuple):
            result, mean, var = result
            assign_all([(self.running_mean, mean), (self.running_var, var)])
        return result.squeeze(0) if unbatched else result


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of ``[N, C, L]`` (or unbatched ``[C, L]``) data."""

    _ranks = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of ``[N, C, H, W]`` (or unbatched ``[C, H, W]``) data."""

    _ranks = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of ``[N, C, D, H, W]`` (or unbatched ``[C, D, H, W]``) data."""

    _ranks = (4, 5)


class _ChannelDropout(Dropout):
    """:class:`Dropout` of whole channels (``F.dropout1d``/``2d``/``3d``) in training."""

    function: Callable[..., Tensor]
    # torch's AlphaDropout and FeatureAlphaDropout keep ``inplace`` but never pass it on
    _writes_in_place = True

    def forward(self, x: Tensor) -> Tensor:
        return type(self).function(x, self.p, self.training,
                                   self.inplace and self._writes_in_place)


class Dropout1d(_ChannelDropout):
    """Zero whole channels of ``[N, C, L]`` data with probability ``p`` in training."""

    function = staticmethod(F.dropout1d)


class Dropout2d(_ChannelDropout):
    """Zero whole channels of ``[N, C, H, W]`` data with probability ``p`` in training."""

    function = staticmethod(F.dropout2d)


class Dropout3d(_ChannelDropout):
    """Zero whole channels of ``[N, C, D, H, W]`` data with probability ``p`` in training."""

    function = staticmethod(F.dropout3d)


class AlphaDropout(_ChannelDropout):
    """:func:`F.alpha_dropout` in training (for SELU networks), the identity in evaluation."""

    function = staticmethod(F.alpha_dropout)
    _writes_in_place = False  # as torch's: its forward leaves ``inplace`` out


class _PadNd(Module):
    """:func:`F.pad` of the last ``nd`` axes by ``padding`` (an int for every side, or
    PyTorch's ``(left, right, top, bottom, front, back)`` order) in one mode."""

    nd = 1
    mode = "constant"

    def __init__(self, padding) -> None:
        count = 2 * self.nd
        values = (padding,) * count if isinstance(padding, (int, np.integer)) else tuple(padding)
        if len(values) != count:
            raise ValueError(f"{type(self).__name__}: padding must be an int or {count} values, "
                             f"got {padding!r}")
        self.padding = tuple(int(v) for v in values)

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last axis with ``value``: ``ConstantPad1d((1, 2), 0.5)``."""


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two axes with ``value``: ``ConstantPad2d((left, right, top, bottom), v)``."""

    nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three axes with ``value``."""

    nd = 3


class ZeroPad1d(_ConstantPadNd):
    """Pad the last axis with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ZeroPad1d):
    """Pad the last two axes with zeros: ``ZeroPad2d((left, right, top, bottom))``."""

    nd = 2


class ZeroPad3d(ZeroPad1d):
    """Pad the last three axes with zeros."""

    nd = 3


class ReflectionPad1d(_PadNd):
    """Pad the last axis with its mirror image about the edge (``F.pad(mode="reflect")``)."""

    mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Reflection padding of the last two axes."""

    nd = 2


class ReflectionPad3d(ReflectionPad1d):
    """Reflection padding of the last three axes."""

    nd = 3


class ReplicationPad1d(_PadNd):
    """Pad the last axis by repeating its edge values (``F.pad(mode="replicate")``)."""

    mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Replication padding of the last two axes."""

    nd = 2


class ReplicationPad3d(ReplicationPad1d):
    """Replication padding of the last three axes."""

    nd = 3


def _as_parameter(container: str, value: Any) -> Tensor:
    """A tensor for a parameter container: a gingham Tensor (made to require gradients,
    as PyTorch wraps a plain tensor in a Parameter) or an array, uploaded."""
    if isinstance(value, Tensor):
        return value if value.requires_grad else value.requires_grad_()
    try:
        array = np.asarray(value)
    except Exception:
        array = None
    if array is None or not dt.is_float(array.dtype):
        raise TypeError(f"{container} holds floating-point gingham Tensors (or arrays), not "
                        f"{type(value).__name__}")
    return Parameter(tensor(array))


class ParameterList(Module):
    """Parameters in a list, named ``0``, ``1``, ... in the state dict (as PyTorch's: each
    is an attribute of that name, so ``to()``, optimisers and state dicts see them):

        self.scales = ParameterList(gingham.ones(4, requires_grad=True) for _ in range(3))
        y = sum(x * s for s in self.scales)
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        self._size = 0
        if values is not None:
            self.extend(values)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList(list(self)[index])
        position = index + self._size if index < 0 else index
        if not 0 <= position < self._size:
            raise IndexError(f"ParameterList: index {index} is out of range ({self._size})")
        return getattr(self, str(position))

    def __setitem__(self, index: int, value: Any) -> None:
        self[index]  # the range check
        setattr(self, str(index + self._size if index < 0 else index),
                _as_parameter("ParameterList", value))

    def __iter__(self) -> Iterator[Tensor]:
        return (getattr(self, str(i)) for i in range(self._size))

    def append(self, value: Any) -> "ParameterList":
        setattr(self, str(self._size), _as_parameter("ParameterList", value))
        self._size += 1
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): Parameter containing: [{_dtype_name(p.dtype)} of size "
                         f"{'x'.join(map(str, p.shape))}]" for i, p in enumerate(self))


class ParameterDict(Module):
    """Parameters by name (the names of their state-dict entries), in insertion order; each
    is an attribute of that name, as in PyTorch:

        self.biases = ParameterDict({"left": gingham.zeros(4), "right": gingham.zeros(4)})
        y = x + self.biases["left"]
    """

    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None
                 ) -> None:
        self._keys: list[str] = []
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key: str, value: Any) -> None:
        _checked_name("ParameterDict", key)
        if key.startswith("_") or (key not in self._keys and hasattr(self, key)):
            raise KeyError(f"ParameterDict: key {key!r} clashes with an attribute of the module")
        if key not in self._keys:
            self._keys.append(key)
        setattr(self, key, _as_parameter("ParameterDict", value))

    def __getitem__(self, key: str) -> Tensor:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __delitem__(self, key: str) -> None:
        self[key]  # KeyError for a missing key
        self._keys.remove(key)
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def keys(self) -> list[str]:
        return list(self._keys)

    def values(self) -> list[Tensor]:
        return [getattr(self, key) for key in self._keys]

    def items(self) -> list[tuple[str, Tensor]]:
        return [(key, getattr(self, key)) for key in self._keys]

    def pop(self, key: str) -> Tensor:
        value = self[key]
        del self[key]
        return value

    def update(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for key, value in pairs:
            self[key] = value


class Bilinear(Module):
    """``y = x1 @ weight @ x2 + bias`` per output feature (:func:`F.bilinear`), ``weight``
    ``[out, in1, in2]``, both initialised from ``U(-1/sqrt(in1), 1/sqrt(in1))`` as PyTorch.

        layer = Bilinear(5, 3, 4)                                # [N, 5], [N, 3] -> [N, 4]
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device: str | None = None) -> None:
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features)
        self.weight = _uniform((out_features, in1_features, in2_features), bound, device,
                               _default_rng)
        self.bias = _uniform((out_features,), bound, device, _default_rng) if bias else None

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class ChannelShuffle(Module):
    """:func:`F.channel_shuffle` with ``groups`` groups."""

    def __init__(self, groups: int) -> None:
        self.groups = groups

    def forward(self, x: Tensor) -> Tensor:
        return F.channel_shuffle(x, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(size, scale_factor, mode="nearest")`` of ``[N, C, H, W]`` data."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(size, scale_factor, mode="bilinear", align_corners=True)``, as PyTorch's."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)



# -- the remaining torch.nn layers -----------------------------------------------------------------


class _LPPoolNd(Module):
    """:func:`F.lp_pool1d` (``2d``, ``3d``) with PyTorch's settings."""

    function: Callable[..., Tensor]

    def __init__(self, norm_type: float, kernel_size, stride=None,
                 ceil_mode: bool = False) -> None:
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return type(self).function(x, self.norm_type, self.kernel_size, self.stride,
                                   self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling of ``[N, C, L]`` data: ``LPPool1d(2, 3, stride=2)``."""

    function = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """Power-average pooling of ``[N, C, H, W]`` data: ``LPPool2d(2, (3, 2))``."""

    function = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """Power-average pooling of ``[N, C, D, H, W]`` data."""

    function = staticmethod(F.lp_pool3d)


class RReLU(Module):
    """:func:`F.rrelu`: random negative slopes in ``[lower, upper]`` in training (drawn on
    the device), their mean in evaluation.

        act = RReLU(0.1, 0.3)
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.rrelu(x, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                              else "")


class Softmax2d(Module):
    """Softmax over the channels of ``[N, C, H, W]`` (or ``[C, H, W]``) data, at each
    position."""

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input of 3 or 4 dimensions, got {x.ndim}")
        return F.softmax(x, -3)


class CircularPad1d(_PadNd):
    """Pad the last axis by wrapping around (``F.pad(mode="circular")``)."""

    mode = "circular"


class CircularPad2d(CircularPad1d):
    """Circular padding of the last two axes."""

    nd = 2


class CircularPad3d(CircularPad1d):
    """Circular padding of the last three axes."""

    nd = 3


class FeatureAlphaDropout(_ChannelDropout):
    """:func:`F.feature_alpha_dropout` (alpha dropout of whole channels) in training, the
    identity in evaluation."""

    function = staticmethod(F.feature_alpha_dropout)
    _writes_in_place = False  # as torch's: its forward leaves ``inplace`` out


class TripletMarginWithDistanceLoss(_Loss):
    """:func:`F.triplet_margin_with_distance_loss`; ``distance_function`` defaults to a
    :class:`PairwiseDistance` (as in PyTorch, a child module).

        loss_fn = TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(p=1))
    """

    def __init__(self, *, distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
                 margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = (distance_function if distance_function is not None
                                  else PairwiseDistance())
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """:func:`F.multilabel_margin_loss` (targets: class lists ended by ``-1``)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (:func:`F.embedding_bag`) with a
    ``[num_embeddings, embedding_dim]`` weight initialised N(0, 1) (the ``padding_idx`` row
    zero), as PyTorch's. ``max_norm`` and ``scale_grad_by_freq`` are not supported.

        bag = EmbeddingBag(10000, 64, mode="sum")
        vectors = bag(tokens, offsets)                      # [T], [B] -> [B, 64]
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device: str | None = None) -> None:
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("EmbeddingBag: max_norm and scale_grad_by_freq are not "
                                      "supported")
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', not {mode!r}")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset = include_last_offset
        self.padding_idx = F._padding_index(padding_idx, num_embeddings)
        if _weight is not None:
            given_device = device or getattr(_weight, "device", None)
            self.weight = Parameter(tensor(_weight, device=given_device))
            return
        values = _default_rng.standard_normal((num_embeddings, embedding_dim))
        if self.padding_idx is not None:
            values[self.padding_idx] = 0.0
        self.weight = Parameter(tensor(values.astype(default_float()), device=device))

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None
                       else "")


class _LazyModule(Module):
    """A layer whose input size (``in_features``, ``in_channels``, ``num_features``) is read
    from its first input, as PyTorch's lazy modules: the first call makes the parameters
    (on the given ``device``, else the input's) and turns the module into its ordinary
    class (:attr:`cls_to_become`). Call it once before building an optimiser over its
    parameters (or loading a state dict), as in PyTorch.

        layer = LazyLinear(10)
        layer(x)                       # x: [N, 128]; layer is now Linear(128, 10)
    """

    cls_to_become: type

    def __init__(self, *args, **kwargs) -> None:
        self._lazy_arguments = (args, kwargs)

    def _input_size(self, x: Tensor) -> int:
        raise NotImplementedError

    def has_uninitialized_params(self) -> bool:
        return "_lazy_arguments" in vars(self)

    def initialize_parameters(self, x: Tensor, *rest) -> None:
        """Make the parameters for input ``x`` and become :attr:`cls_to_become`."""
        if not self.has_uninitialized_params():
            return
        refuse_while_tracing(f"{type(self).__name__}'s first call")
        args, kwargs = self._lazy_arguments
        kwargs = {**kwargs, "device": kwargs.get("device") or x.device}
        size = self._input_size(x)
        del self._lazy_arguments
        training = self.training
        self.cls_to_become.__init__(self, size, *args, **kwargs)
        self.__class__ = self.cls_to_become
        self.train(training)

    def forward(self, x: Tensor, *rest, **kwargs):
        self.initialize_parameters(x)
        return self.forward(x, *rest, **kwargs)  # not self(): the hooks ran once

    def extra_repr(self) -> str:
        args, kwargs = self._lazy_arguments
        return ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])


class LazyLinear(_LazyModule, Linear):
    """:class:`Linear` with ``in_features`` taken from the first input's last axis:
    ``LazyLinear(out_features, bias=True, device=None)``."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: str | None = None) -> None:
        super().__init__(out_features, bias, device=device)

    def _input_size(self, x: Tensor) -> int:
        return x.shape[-1]


class _LazyConvNd(_LazyModule):
    """A convolution with ``in_channels`` from the first input (batched or not; the last
    axis for channels-last data)."""

    def _input_size(self, x: Tensor) -> int:
        if self._lazy_arguments[1].get("data_format") == "NHWC":
            return x.shape[-1]
        return x.shape[0] if x.ndim == self._nd + 1 else x.shape[1]


def _lazy_conv(base: type) -> type:
    """The lazy twin of a convolution class: its signature without ``in_channels``."""

    def __init__(self, out_channels: int, kernel_size, *args, **kwargs) -> None:
        _LazyModule.__init__(self, out_channels, kernel_size, *args, **kwargs)

    doc = (f":class:`{base.__name__}` with ``in_channels`` taken from the first input: "
           f"``Lazy{base.__name__}(out_channels, kernel_size, ...)``, the rest of its "
           "arguments as there.")
    return type(f"Lazy{base.__name__}", (_LazyConvNd, base),
                {"cls_to_become": base, "__init__": __init__, "__doc__": doc,
                 "__module__": __name__})


LazyConv1d = _lazy_conv(Conv1d)
LazyConv2d = _lazy_conv(Conv2d)
LazyConv3d = _lazy_conv(Conv3d)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d)


def _lazy_norm(base: type, channel_axis) -> type:
    """The lazy twin of a batch or instance norm: ``num_features`` from the first input."""

    # PyTorch's lazy norms, instance norms included, default to affine parameters and
    # running statistics.
    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: str | None = None,
                 **kwargs) -> None:
        _LazyModule.__init__(self, eps=eps, momentum=momentum, affine=affine,
                             track_running_stats=track_running_stats, device=device, **kwargs)

    doc = (f":class:`{base.__name__}` with ``num_features`` taken from the first input: "
           f"``Lazy{base.__name__}(eps=1e-5, momentum=0.1, affine=True, "
           "track_running_stats=True, device=None)`` (PyTorch's defaults, for the instance "
           "norms too).")
    return type(f"Lazy{base.__name__}", (_LazyModule, base),
                {"cls_to_become": base, "__init__": __init__, "__doc__": doc,
                 "__module__": __name__, "_input_size": lambda self, x: channel_axis(self, x)})


def _batch_channels(module: Module, x: Tensor) -> int:
    if module._lazy_arguments[1].get("data_format") == "NHWC":
        return x.shape[-1]
    return x.shape[1]


def _instance_channels(module: Module, x: Tensor) -> int:
    return x.shape[1] if x.ndim == module._ranks[1] else x.shape[0]


LazyBatchNorm1d = _lazy_norm(BatchNorm1d, _batch_channels)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d, _batch_channels)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d, _batch_channels)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d, _instance_channels)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d, _instance_channels)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d, _instance_channels)


class _ASMoutput(NamedTuple):
    """:class:`AdaptiveLogSoftmaxWithLoss`'s result: each target's log-probability and the
    mean negative log-likelihood."""

    output: Tensor
    loss: Tensor


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax over many classes (Grave et al.), as PyTorch's: the frequent classes
    below ``cutoffs[0]`` and one entry per tail cluster share the ``head`` linear layer; each
    cluster's classes come from a two-layer ``tail`` projection shrunk by ``div_value``.
    ``forward(input, target)`` returns ``(output, loss)``; :meth:`log_prob` the full
    distribution, :meth:`predict` the likeliest class. Every row goes through every cluster
    (PyTorch picks rows per cluster, a host-side decision), so the result is the same and a
    compiled step needs no host read; a target outside ``[0, n_classes)`` is therefore not
    detected (its log-probability reads as 0) where PyTorch raises.

        asm = AdaptiveLogSoftmaxWithLoss(512, 50000, cutoffs=[2000, 10000])
        output, loss = asm(hidden, tokens)
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int],
                 div_value: float = 4.0, head_bias: bool = False,
                 device: str | None = None) -> None:
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device)
        self.tail = ModuleList(
            Sequential(Linear(in_features, int(in_features // div_value ** (i + 1)), bias=False,
                              device=device),
                       Linear(int(in_features // div_value ** (i + 1)),
                              self.cutoffs[i + 1] - self.cutoffs[i], bias=False, device=device))
            for i in range(self.n_clusters))

    def log_prob(self, input: Tensor) -> Tensor:
        """``[N, n_classes]`` log-probabilities of every class for ``[N, in_features]``
        input: a cluster's classes add its log-probability in the head."""
        head = F.log_softmax(self.head(input), dim=-1)
        parts = [head[..., :self.shortlist_size]]
        for i, projection in enumerate(self.tail):
            cluster = F.log_softmax(projection(input), dim=-1)
            parts.append(cluster + head[..., self.shortlist_size + i:self.shortlist_size + i + 1])
        return cat(parts, -1)

    def predict(self, input: Tensor) -> Tensor:
        """The likeliest class of each row (int64)."""
        return self.log_prob(input).argmax(-1)

    def forward(self, input: Tensor, target: Tensor) -> _ASMoutput:
        if target.ndim == 1:
            if input.ndim != 2 or input.shape[0] != target.shape[0]:
                raise ValueError(f"AdaptiveLogSoftmaxWithLoss: a 1D target needs 2D input with "
                                 f"the same batch size, got input {input.shape}, target "
                                 f"{target.shape}")
        elif target.ndim == 0:
            if input.ndim != 1:
                raise ValueError(f"AdaptiveLogSoftmaxWithLoss: a 0D target needs 1D input, got "
                                 f"{input.shape}")
        else:
            raise ValueError("AdaptiveLogSoftmaxWithLoss: 0D or 1D target tensor expected, "
                             "multi-target not supported")
        batched = target.ndim == 1
        rows = input if batched else input.unsqueeze(0)
        labels = target if batched else target.reshape(1)
        output = F._pick_class(self.log_prob(rows), labels)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.reshape(()), loss)


# torch.nn.modules.module's spelling of the hooks every module runs:
# gingham.nn.modules.module.register_module_full_backward_hook(...)
module = _hooks

__all__ = ["Module", "Parameter", "IncompatibleKeys", "Sequential", "ModuleList", "ModuleDict",
           "Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm",
           "GroupNorm",
           "LayerNorm", "RMSNorm", "LocalResponseNorm", "Embedding", "Dropout",
           "Identity", "ReLU", "ReLU6", "Hardtanh", "LeakyReLU", "PReLU", "ELU", "GELU", "SiLU",
           "Mish", "Hardswish", "Softplus", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
           "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
           "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "FractionalMaxPool2d", "Upsample",
           "Flatten", "Unflatten",
           "PixelShuffle", "PixelUnshuffle", "Unfold", "Fold", "CosineSimilarity",
           "L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "BCELoss",
           "BCEWithLogitsLoss", "NLLLoss", "CrossEntropyLoss", "CTCLoss", "manual_seed",
           "Hardsigmoid", "SELU", "CELU", "Softsign", "GLU", "LogSigmoid", "Softmin",
           "Softshrink", "Hardshrink", "Tanhshrink", "Threshold", "PairwiseDistance",
           "MarginRankingLoss", "TripletMarginLoss", "CosineEmbeddingLoss",
           "HingeEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss", "SoftMarginLoss",
           "MultiLabelSoftMarginLoss", "MultiMarginLoss", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ParameterList",
           "ParameterDict", "Bilinear", "ChannelShuffle", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "LPPool1d", "LPPool2d", "LPPool3d", "RReLU", "Softmax2d",
           "CircularPad1d", "CircularPad2d", "CircularPad3d", "FeatureAlphaDropout",
           "TripletMarginWithDistanceLoss", "MultiLabelMarginLoss", "EmbeddingBag", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
           "AdaptiveLogSoftmaxWithLoss"]
