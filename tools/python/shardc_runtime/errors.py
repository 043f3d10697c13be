"""Typed errors of the adapter: every refusal names what it refuses.

`PlanError` is a plan, rank file or manifest the runtime cannot use (the same
inputs `shardc verify` refuses: bad rank strings, duplicate or escaping manifest
paths, absurd world sizes, files changed after the compile, non-regular files).
`CheckpointError` is a safetensors checkpoint that cannot give the plan's
tensors (bad header, offsets, dtypes or shapes, index entries leaving the
checkpoint directory); it carries the tensor and file it is about.
Both are `ValueError`s, so callers that caught `ValueError` keep working.
"""

from __future__ import annotations


class PlanError(ValueError):
    """A plan, rank file or manifest the runtime cannot use (inconsistent,
    incomplete, changed after the compile, or out of shardc's limits)."""


class CheckpointError(ValueError):
    """A checkpoint that cannot give a tensor of the plan.

    `tensor` is the tensor's name ("" when the whole file is bad), `file` the
    path of the safetensors or index file.
    """

    def __init__(self, message: str, *, tensor: str = "", file: str = "") -> None:
        where = f"{file}: " if file else ""
        what = f"tensor {tensor!r}: " if tensor else ""
        super().__init__(f"{where}{what}{message}")
        self.tensor = tensor
        self.file = file
