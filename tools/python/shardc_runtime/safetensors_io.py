"""Minimal safetensors reader and writer (stdlib + numpy), reading boxes only.

Format (https://github.com/huggingface/safetensors): 8-byte little-endian header
length N, N bytes of JSON `{name: {dtype, shape, data_offsets: [begin, end]},
"__metadata__": {...}}`, then the data; offsets are BYTES relative to the end of
the header, tensors are row-major (C order), little endian.

`Checkpoint` opens one file, a directory of `*.safetensors` files, or a Hugging
Face `model.safetensors.index.json`, and reads a *box* of a tensor (global offset
+ shape, in elements) with `os.pread` of only the contiguous runs the box covers:
it never reads a whole tensor unless the box is the whole tensor. `bytes_read`
counts the data bytes read, so callers (and the tests) can prove it.
"""

import json
import os
import struct

import numpy as np

from . import dtypes

_MAX_HEADER = 100 * 1024 * 1024


class TensorEntry:
    """Where one tensor lives: file, dtype (shardc name), shape, data start (bytes)."""

    def __init__(self, path, dtype, shape, begin, end):
        self.path, self.dtype, self.shape = path, dtype, tuple(shape)
        self.begin, self.end = begin, end


def read_header(path):
    """Parse a safetensors header: ({name: TensorEntry}, metadata dict).

    Raises ValueError on a malformed header (bad length, overlapping or out of
    range offsets, unknown dtype, size not matching dtype x shape).
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: not a safetensors file (short header)")
        (n,) = struct.unpack("<Q", raw)
        if n > _MAX_HEADER or 8 + n > size:
            raise ValueError(f"{path}: header length {n} out of range")
        header = json.loads(f.read(n))
    base = 8 + n
    entries = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dtype = dtypes.from_safetensors(e["dtype"])
        begin, end = e["data_offsets"]
        numel = int(np.prod(e["shape"], dtype=np.int64)) if e["shape"] else 1
        if end - begin != numel * dtypes.element_size(dtype) or base + end > size:
            raise ValueError(f"{path}: tensor {name}: data_offsets {e['data_offsets']} "
                             f"do not match {e['dtype']} {e['shape']}")
        entries[name] = TensorEntry(path, dtype, e["shape"], base + begin, base + end)
    return entries, header.get("__metadata__", {})


def write_file(path, tensors, metadata=None):
    """Write {name: (numpy array, shardc dtype name)} as one safetensors file.

    Arrays are written in the given order, row-major; the array's bytes are the
    element bit patterns (use `dtypes.storage_dtype(name)` arrays).
    """
    header, blobs, pos = {}, [], 0
    for name, (arr, dtype) in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        if len(data) != arr.size * dtypes.element_size(dtype):
            raise ValueError(f"{name}: array itemsize does not match dtype {dtype}")
        header[name] = {"dtype": dtypes.safetensors_code(dtype), "shape": list(arr.shape),
                        "data_offsets": [pos, pos + len(data)]}
        blobs.append(data)
        pos += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as the reference writer
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def _runs(shape, offset, box):
    """Contiguous element runs covering `box` at `offset` in a row-major `shape`.

    Yields (start element, length in elements). Trailing dims the box covers
    fully merge into one run, so a row-sharded box is a single run.
    """
    nd = len(shape)
    if nd == 0:
        yield 0, 1
        return
    k = nd - 1  # first dim (from the end) that the box does not cover fully
    while k > 0 and offset[k] == 0 and box[k] == shape[k]:
        k -= 1
    inner = int(np.prod(shape[k + 1:], dtype=np.int64))
    run = box[k] * inner
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(nd)]
    outer = [range(offset[d], offset[d] + box[d]) for d in range(k)]
    for idx in np.ndindex(*[len(r) for r in outer]) if k else [()]:
        start = sum((offset[d] + idx[d]) * strides[d] for d in range(k))
        yield start + offset[k] * strides[k], run


class Checkpoint:
    """Read-only view of safetensors tensors by name, reading boxes with pread."""

    def __init__(self, path):
        self.entries, self.metadata, self.bytes_read = {}, {}, 0
        for file in self._files(path):
            entries, meta = read_header(file)
            for name in entries:
                if name in self.entries:
                    raise ValueError(f"tensor {name} is in two checkpoint files")
            self.entries.update(entries)
            self.metadata.update(meta)
        self._fds = {}

    @staticmethod
    def _files(path):
        path = os.fspath(path)
        if os.path.isdir(path):
            files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
            return [os.path.join(path, f) for f in files]
        if path.endswith(".json"):  # model.safetensors.index.json
            with open(path) as f:
                index = json.load(f)
            base = os.path.dirname(path)
            return [os.path.join(base, f) for f in sorted(set(index["weight_map"].values()))]
        return [path]

    def __contains__(self, name):
        return name in self.entries

    def entry(self, name):
        """The TensorEntry of `name`; KeyError with the name when absent."""
        try:
            return self.entries[name]
        except KeyError:
            raise KeyError(f"tensor {name!r} is not in the checkpoint") from None

    def _fd(self, path):
        if path not in self._fds:
            self._fds[path] = os.open(path, os.O_RDONLY)
        return self._fds[path]

    def read_box(self, name, offset, shape):
        """Read elements [offset, offset + shape) of tensor `name` into a new array
        of storage dtype and the given shape.

        Only the bytes of the box's contiguous runs are read. Raises ValueError
        when the box leaves the tensor.
        """
        e = self.entry(name)
        if len(offset) != len(e.shape) or len(shape) != len(e.shape):
            raise ValueError(f"{name}: box rank {len(shape)} != tensor rank {len(e.shape)}")
        for o, s, g in zip(offset, shape, e.shape):
            if s < 0 or o < 0 or (s > 0 and o + s > g):
                raise ValueError(f"{name}: box offset {list(offset)} shape {list(shape)} "
                                 f"outside {list(e.shape)}")
        sdt = dtypes.storage_dtype(e.dtype)
        out = np.empty(shape, dtype=sdt)
        if out.size == 0:
            return out
        flat = out.reshape(-1).view(np.uint8)
        es, fd, pos = sdt.itemsize, self._fd(e.path), 0
        for start, length in _runs(e.shape, offset, shape):
            n = length * es
            data = os.pread(fd, n, e.begin + start * es)
            if len(data) != n:
                raise ValueError(f"{name}: short read in {e.path}")
            flat[pos:pos + n] = np.frombuffer(data, dtype=np.uint8)
            pos += n
        self.bytes_read += pos
        return out

    def read_full(self, name):
        """The whole tensor `name` (storage dtype). Test and tooling helper."""
        e = self.entry(name)
        return self.read_box(name, [0] * len(e.shape), list(e.shape))

    def close(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
