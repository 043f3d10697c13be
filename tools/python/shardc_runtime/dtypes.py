"""dtype names used by shardc (torch spelling) and how the runtime stores them.

Every tensor the adapter handles is kept as a numpy array of a *storage dtype*
with the same element size as the real dtype, so that bytes move bit for bit
(no float conversion ever happens): numpy has no bfloat16 or float8, so those
are stored as int16 / int8 bit patterns. `to_torch` reinterprets the storage
as the real torch dtype where torch has it.
"""

import numpy as np

# name -> (element size in bytes, numpy storage dtype, safetensors dtype code)
_TABLE = {
    "float64": (8, np.dtype("<f8"), "F64"),
    "float32": (4, np.dtype("<f4"), "F32"),
    "bfloat16": (2, np.dtype("<i2"), "BF16"),
    "float16": (2, np.dtype("<f2"), "F16"),
    "float8_e4m3fn": (1, np.dtype("i1"), "F8_E4M3"),
    "float8_e5m2": (1, np.dtype("i1"), "F8_E5M2"),
    "int64": (8, np.dtype("<i8"), "I64"),
    "int32": (4, np.dtype("<i4"), "I32"),
    "int16": (2, np.dtype("<i2"), "I16"),
    "int8": (1, np.dtype("i1"), "I8"),
    "uint8": (1, np.dtype("u1"), "U8"),
    "bool": (1, np.dtype("?"), "BOOL"),
}

_FROM_SAFETENSORS = {code: name for name, (_, _, code) in _TABLE.items()}


def element_size(name):
    """Bytes per element of a shardc dtype name (e.g. "bfloat16" -> 2)."""
    return _TABLE[name][0]


def storage_dtype(name):
    """numpy dtype holding the raw elements of `name` (same size, little endian)."""
    return _TABLE[name][1]


def safetensors_code(name):
    """safetensors header dtype code of `name` (e.g. "bfloat16" -> "BF16")."""
    return _TABLE[name][2]


def from_safetensors(code):
    """shardc dtype name of a safetensors dtype code; KeyError if unknown."""
    return _FROM_SAFETENSORS[code]


def torch_dtype(name):
    """The torch dtype of `name`, or None when this torch lacks it (float8 in 1.13)."""
    import torch

    return getattr(torch, name, None)


def to_torch(array, name):
    """A torch tensor sharing `array`'s memory, reinterpreted as dtype `name`.

    Bit patterns are kept (no conversion). float8 dtypes stay int8 views when the
    installed torch has no float8 dtype.
    """
    import torch

    t = torch.from_numpy(np.ascontiguousarray(array))
    real = torch_dtype(name)
    if real is None or t.dtype == real:
        return t
    return t.view(real)
