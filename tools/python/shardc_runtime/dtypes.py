"""dtype names used by shardc (torch spelling) and how the runtime stores them.

Every tensor the adapter handles as numpy is kept as an array of a *storage
dtype* with the same element size as the real dtype, so that bytes move bit for
bit (no float conversion ever happens): numpy has no bfloat16 or float8, so
those are stored as int16 / int8 bit patterns. `shardc_runtime.torch` views
the storage as the real torch dtype. The table is shardc's
(src/import/safetensors_header.cpp): any other dtype is refused with a message
naming it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import PlanError

# name -> (element size in bytes, numpy storage dtype, safetensors dtype code)
_TABLE: dict[str, tuple[int, np.dtype[Any], str]] = {
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
    "uint16": (2, np.dtype("<u2"), "U16"),
    "uint32": (4, np.dtype("<u4"), "U32"),
    "uint64": (8, np.dtype("<u8"), "U64"),
    "float8_e8m0fnu": (1, np.dtype("u1"), "F8_E8M0"),
}

_FROM_SAFETENSORS = {code: name for name, (_, _, code) in _TABLE.items()}
SAFETENSORS_CODES = tuple(_FROM_SAFETENSORS)


def _entry(name: str) -> tuple[int, np.dtype[Any], str]:
    try:
        return _TABLE[name]
    except (KeyError, TypeError):
        raise PlanError(f"unknown dtype {name!r}; shardc's dtypes are "
                        f"{', '.join(_TABLE)}") from None


def element_size(name: str) -> int:
    """Bytes per element of a shardc dtype name (e.g. "bfloat16" -> 2)."""
    return _entry(name)[0]


def storage_dtype(name: str) -> np.dtype[Any]:
    """numpy dtype holding the raw elements of `name` (same size, little endian)."""
    return _entry(name)[1]


def safetensors_code(name: str) -> str:
    """safetensors header dtype code of `name` (e.g. "bfloat16" -> "BF16")."""
    return _entry(name)[2]


def from_safetensors(code: str) -> str | None:
    """shardc dtype name of a safetensors dtype code; None if shardc has none."""
    return _FROM_SAFETENSORS.get(code)
