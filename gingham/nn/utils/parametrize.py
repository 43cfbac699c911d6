"""``torch.nn.utils.parametrize``: a tensor of a module recomputed from other tensors at
every access, so a layer's ``forward`` (which reads ``self.weight``) sees the parametrized
value and gradients reach the originals.

    class Symmetric(nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).mT

    parametrize.register_parametrization(layer, "weight", Symmetric())
    layer.weight                      # recomputed from layer.parametrizations.weight.original

As in PyTorch, the module's class becomes a subclass (``ParametrizedLinear``) whose
``weight`` is a property, and the originals live in ``module.parametrizations.weight`` under
PyTorch's state-dict names (``parametrizations.weight.original``, or ``original0``,
``original1``, ... when the first parametrization's ``right_inverse`` returns a tuple).
"""

from __future__ import annotations

from ...frontend.tensor import Tensor, no_grad, refuse_while_tracing, tensor
from ..modules import Module, ModuleDict, ModuleList


def _leaf(value: Tensor, requires_grad: bool) -> Tensor:
    """A new leaf holding ``value`` (registration is a host step, like making a layer)."""
    return tensor(value.numpy(), device=value.device, requires_grad=requires_grad)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to its original(s)."""

    def __init__(self, modules, original: Tensor) -> None:
        super().__init__(modules)
        first = self.layers[0]
        with no_grad():
            new = first.right_inverse(original) if hasattr(first, "right_inverse") else original
        self.is_tensor = isinstance(new, Tensor)
        if self.is_tensor:
            self.original = _leaf(new, original.requires_grad)
        else:
            self.ntensors = len(new)
            for index, value in enumerate(new):
                setattr(self, f"original{index}", _leaf(value, original.requires_grad))

    def originals(self) -> list[Tensor]:
        if self.is_tensor:
            return [self.original]
        return [getattr(self, f"original{index}") for index in range(self.ntensors)]

    def forward(self) -> Tensor:
        first, *rest = self.layers
        value = first(*self.originals())
        for parametrization in rest:
            value = parametrization(value)
        return value

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals so that the parametrized tensor becomes ``value`` (outside
        autograd), through each parametrization's ``right_inverse`` from the last."""
        with no_grad():
            for parametrization in reversed(self.layers):
                if hasattr(parametrization, "right_inverse"):
                    value = parametrization.right_inverse(value)
            values = [value] if self.is_tensor else list(value)
            for original, new in zip(self.originals(), values, strict=True):
                original.data = new


def _parametrized_property(tensor_name: str) -> property:
    def get(module: Module) -> Tensor:
        return module.parametrizations[tensor_name]()

    def set_(module: Module, value: Tensor) -> None:
        module.parametrizations[tensor_name].right_inverse(value)

    return property(get, set_, doc=f"``{tensor_name}``, recomputed from its parametrizations")


def register_parametrization(module: Module, tensor_name: str, parametrization: Module,
                             *, unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` (a module whose
    ``forward`` takes the original(s)); a second call for the same tensor chains another
    parametrization after the first. Returns ``module``.

        register_parametrization(conv, "weight", Symmetric())
    """
    refuse_while_tracing("register_parametrization()")
    if is_parametrized(module, tensor_name):
        module.parametrizations[tensor_name].append(parametrization)
        return module
    original = vars(module).get(tensor_name)
    if not isinstance(original, Tensor):
        raise ValueError(f"register_parametrization: module {type(module).__name__} has no "
                         f"tensor attribute {tensor_name!r} to parametrize")
    chain = ParametrizationList([parametrization], original)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        cls = type(module)
        module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})
        module.parametrizations = ModuleDict()
    setattr(type(module), tensor_name, _parametrized_property(tensor_name))
    module.parametrizations[tensor_name] = chain
    if not module.training:
        chain.eval()
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has parametrizations (for ``tensor_name``, when given)."""
    parametrizations = vars(module).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return tensor_name is None or tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Turn ``module.<tensor_name>`` back into a plain parameter holding its parametrized
    value (or, with ``leave_parametrized=False``, its single original). Returns ``module``.

        remove_parametrizations(layer, "weight")     # keep the normalised weight, drop g and v
    """
    refuse_while_tracing("remove_parametrizations()")
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {type(module).__name__} does not have a parametrization on "
                         f"{tensor_name}")
    chain = module.parametrizations[tensor_name]
    if not leave_parametrized and not chain.is_tensor:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                         "that is parametrized in terms of a sequence of tensors.")
    originals = chain.originals()
    with no_grad():
        value = getattr(module, tensor_name) if leave_parametrized else originals[0]
    requires_grad = originals[0].requires_grad
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    setattr(module, tensor_name, _leaf(value, requires_grad))
    if len(module.parametrizations) == 0:
        del module.parametrizations
        module.__class__ = type(module).__bases__[0]
    return module


__all__ = ["ParametrizationList", "is_parametrized", "register_parametrization",
           "remove_parametrizations"]
