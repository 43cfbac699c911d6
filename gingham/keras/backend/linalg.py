"""``keras.ops.linalg``: not implemented for gingham yet (each op raises NotImplementedError)."""

from ._unsupported import unsupported_module_getattr

__getattr__ = unsupported_module_getattr(__name__, "linalg")
