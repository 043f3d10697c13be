"""Safetensors checkpoints: validated headers, box reads through the
`safetensors` library's slices (only the box's bytes), and a writer.

Format (https://github.com/huggingface/safetensors): 8-byte little-endian header
length N, N bytes of JSON `{name: {dtype, shape, data_offsets: [begin, end]},
"__metadata__": {...}}`, then the data; offsets are BYTES relative to the end of
the header, tensors row-major (C order), little endian.

`Checkpoint` opens one file, a directory (its `model.safetensors.index.json`
when present, else every `*.safetensors`), or an index file, and refuses what
`shardc import` / `validate` refuse (src/import/safetensors_header.cpp,
src/import/checkpoint.cpp): a FIFO, device or directory where a file should be
(checked before any open: never blocks), a header longer than the file or than
100,000,000 bytes, unknown dtypes, extents that are not non-negative integers or whose
product reaches 2^62, more than 64 dims, `data_offsets` that are negative,
reversed, outside the data section, not numel x element size, or overlapping
another tensor's, duplicate JSON keys, an index whose `weight_map` value is not
a plain file name in the checkpoint directory (`../x`, `/abs`, `a/b`), an index
naming a file that lacks the tensor, a tensor in two files. Every refusal is a
`CheckpointError` naming the file and tensor.

`read_box(name, offset, shape)` reads elements [offset, offset + shape) with
`safe_open(file, framework="pt").get_slice(name)[...]`: the library copies only
the slice's contiguous runs out of its memory map (the numpy framework of
safetensors has no bfloat16, so the slice comes back as a torch tensor and is
viewed as the storage dtype). `bytes_read` counts the bytes of the slices read.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import dtypes
from .errors import CheckpointError
from .files import open_regular, read_regular, require_regular

MAX_HEADER_BYTES = 100_000_000  # shardc: limits::kMaxSafetensorsHeaderBytes
MAX_INDEX_BYTES = 256 << 20  # shardc: limits::kMaxCheckpointJsonBytes
MAX_NUMEL = 1 << 62  # shardc: limits::kMaxNumel
MAX_RANK = 64  # shardc: limits::kMaxTensorRank
INDEX_NAME = "model.safetensors.index.json"

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lives: file, dtype (shardc name), shape (elements),
    data offsets (bytes, relative to the data section)."""

    path: str
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _json(data: bytes, path: str, what: str) -> Any:
    try:
        return json.loads(data, object_pairs_hook=_unique_keys)
    except (ValueError, UnicodeDecodeError) as ex:
        raise CheckpointError(f"{what} is not valid JSON: {ex}", file=path) from None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry(path: str, name: str, raw: Any, data_size: int) -> TensorEntry:
    def bad(message: str) -> CheckpointError:
        return CheckpointError(message, tensor=name, file=path)

    if not isinstance(raw, dict):
        raise bad("entry is not an object {dtype, shape, data_offsets}")
    code = raw.get("dtype")
    dtype = dtypes.from_safetensors(code) if isinstance(code, str) else None
    if dtype is None:
        raise bad(f"unknown dtype {code!r} (supported: {', '.join(dtypes.SAFETENSORS_CODES)})")
    shape = raw.get("shape")
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise bad(f"shape {shape!r} is not a list of non-negative integers")
    if len(shape) > MAX_RANK:
        raise bad(f"shape has more than {MAX_RANK} dimensions")
    numel = 1
    for extent in shape:
        numel *= extent
        if numel >= MAX_NUMEL:
            raise bad("shape has 2^62 or more elements")
    offsets = raw.get("data_offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise bad(f"data_offsets {offsets!r} are not [begin, end] with non-negative integers, "
                  "begin <= end")
    begin, end = offsets
    if end > data_size:
        raise bad(f"data_offsets [{begin}, {end}) are outside the data section of "
                  f"{data_size} bytes")
    if end - begin != numel * dtypes.element_size(dtype):
        raise bad(f"data_offsets span {end - begin} bytes, but shape {shape} of {dtype} needs "
                  f"{numel * dtypes.element_size(dtype)}")
    return TensorEntry(path, name, dtype, tuple(shape), begin, end)


def read_header(path: str) -> tuple[dict[str, TensorEntry], dict[str, str]]:
    """Parse and validate a safetensors header: ({name: TensorEntry}, metadata).
    Raises CheckpointError (see the module doc for every rule)."""
    fd = open_regular(path, lambda m: CheckpointError(m, file=path))
    try:
        size = os.fstat(fd).st_size
        raw = os.pread(fd, 8, 0)
        if len(raw) != 8:
            raise CheckpointError("not a safetensors file (shorter than its 8-byte header "
                                  "length)", file=path)
        (length,) = struct.unpack("<Q", raw)
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise CheckpointError(f"header length {length} is larger than the file "
                                  f"({size} bytes) or than {MAX_HEADER_BYTES} bytes", file=path)
        header = _json(os.pread(fd, length, 8), path, "the header")
    finally:
        os.close(fd)
    if not isinstance(header, dict):
        raise CheckpointError("the header is not a JSON object", file=path)
    data_size = size - 8 - length
    entries: dict[str, TensorEntry] = {}
    for name, raw_entry in header.items():
        if name != "__metadata__":
            entries[name] = _entry(path, name, raw_entry, data_size)
    by_begin = sorted((e for e in entries.values() if e.end > e.begin), key=lambda e: e.begin)
    for before, entry in zip(by_begin, by_begin[1:]):
        if entry.begin < before.end:
            raise CheckpointError(f"data_offsets [{entry.begin}, {entry.end}) overlap tensor "
                                  f"{before.name!r} [{before.begin}, {before.end})",
                                  tensor=entry.name, file=path)
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError("__metadata__ is not an object of strings", file=path)
    return entries, meta


def _index_files(index_path: str) -> tuple[list[str], dict[str, str]]:
    """(files, {tensor: file}) of a model.safetensors.index.json."""
    doc = _json(read_regular(index_path, MAX_INDEX_BYTES,
                             lambda m: CheckpointError(m, file=index_path)), index_path, "the index")
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict):
        raise CheckpointError("the index is not a JSON object with a `weight_map` object",
                              file=index_path)
    base = os.path.dirname(os.path.abspath(index_path))
    where: dict[str, str] = {}
    for tensor, file in weight_map.items():
        if not isinstance(file, str) or file in ("", ".", "..") or "/" in file or "\0" in file:
            raise CheckpointError(f"`weight_map` value {file!r} is not a plain file name in the "
                                  "checkpoint directory", tensor=tensor, file=index_path)
        where[tensor] = os.path.join(base, file)
    return sorted(set(where.values())), where


def checkpoint_files(path: str) -> tuple[list[str], dict[str, str]]:
    """The safetensors files of a checkpoint path and, for an index, the file
    each tensor is listed in."""
    if os.path.isdir(path):
        names = sorted(os.listdir(path))
        if INDEX_NAME in names:
            return _index_files(os.path.join(path, INDEX_NAME))
        files = [os.path.join(path, n) for n in names if n.endswith(".safetensors")]
        if not files:
            raise CheckpointError("the directory has no *.safetensors files", file=path)
        return files, {}
    if path.endswith(".json"):
        return _index_files(path)
    return [path], {}


class Checkpoint:
    """Read-only view of safetensors tensors by name, reading boxes by slices."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.entries: dict[str, TensorEntry] = {}
        self.metadata: dict[str, str] = {}
        self.bytes_read = 0
        files, listed = checkpoint_files(self.path)
        for file in files:
            require_regular(file, lambda m: CheckpointError(m, file=file))
        for file in files:
            entries, meta = read_header(file)
            for name, entry in entries.items():
                if name in self.entries:
                    raise CheckpointError(f"also in {self.entries[name].path}", tensor=name,
                                          file=file)
                self.entries[name] = entry
            self.metadata.update(meta)
        for tensor, file in listed.items():
            found = self.entries.get(tensor)
            if found is None or found.path != file:
                raise CheckpointError(f"the index lists it in {os.path.basename(file)}, which does "
                                      "not hold it", tensor=tensor, file=self.path)
        self._handles: dict[str, Any] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def entry(self, name: str) -> TensorEntry:
        """The TensorEntry of `name`; CheckpointError naming it when absent."""
        try:
            return self.entries[name]
        except KeyError:
            raise CheckpointError("not in the checkpoint", tensor=name, file=self.path) from None

    def _handle(self, path: str) -> Any:
        """The file's `safe_open` handle (opened once; type re-checked first)."""
        from safetensors import safe_open

        if path not in self._handles:
            require_regular(path, lambda m: CheckpointError(m, file=path))
            self._handles[path] = safe_open(path, framework="pt")
        return self._handles[path]

    def read_box(self, name: str, offset: list[int], shape: list[int]) -> Array:
        """Elements [offset, offset + shape) of tensor `name` as a new array of
        its storage dtype. Only the box's bytes are read; CheckpointError when
        the box leaves the tensor."""
        entry = self.entry(name)
        if len(offset) != len(entry.shape) or len(shape) != len(entry.shape):
            raise CheckpointError(f"box of rank {len(shape)} in a tensor of rank "
                                  f"{len(entry.shape)}", tensor=name, file=entry.path)
        for start, extent, size in zip(offset, shape, entry.shape):
            if extent < 0 or start < 0 or (extent > 0 and start + extent > size):
                raise CheckpointError(f"box offset {list(offset)} shape {list(shape)} outside "
                                      f"{list(entry.shape)}", tensor=name, file=entry.path)
        sdt = dtypes.storage_dtype(entry.dtype)
        if any(extent == 0 for extent in shape):
            return np.empty(shape, dtype=sdt)
        index = tuple(slice(o, o + s) for o, s in zip(offset, shape))
        handle = self._handle(entry.path)
        # a 0-dim tensor has no slice index: it is read whole (one element)
        tensor = handle.get_slice(name)[index] if index else handle.get_tensor(name)
        out = _storage(tensor, sdt).reshape(shape)
        self.bytes_read += out.nbytes
        return out

    def read_full(self, name: str) -> Array:
        """The whole tensor `name` (storage dtype). Test and tooling helper."""
        entry = self.entry(name)
        return self.read_box(name, [0] * len(entry.shape), list(entry.shape))

    def names(self) -> Iterator[str]:
        return iter(self.entries)

    def close(self) -> None:
        self._handles = {}

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _storage(tensor: Any, sdt: np.dtype[Any]) -> Array:
    """A torch tensor's elements as a numpy array of the storage dtype (bits kept)."""
    import torch

    flat = tensor.contiguous().reshape(-1)
    as_bytes: Array = flat.view(torch.uint8).numpy()
    return np.array(as_bytes.view(sdt))


def write_file(path: str | os.PathLike[str], tensors: Mapping[str, tuple[Array, str]],
               metadata: Mapping[str, str] | None = None) -> None:
    """Write {name: (storage array, shardc dtype name)} as one safetensors file
    with the `safetensors` library (bit patterns kept; atomically replaced)."""
    import torch
    from safetensors.torch import save_file

    out: dict[str, torch.Tensor] = {}
    for name, (array, dtype) in tensors.items():
        data = np.ascontiguousarray(array)
        if data.dtype.itemsize != dtypes.element_size(dtype):
            raise ValueError(f"{name}: array itemsize {data.dtype.itemsize} does not match "
                             f"dtype {dtype}")
        raw = torch.from_numpy(data.reshape(-1).view(np.uint8).copy())
        out[name] = raw.view(getattr(torch, dtype)).reshape(data.shape)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    save_file(out, tmp, metadata=dict(metadata) if metadata else None)
    os.replace(tmp, path)
