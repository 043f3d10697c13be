"""The torch side of shardc_runtime (needs the `torch` extra: torch 2.13).

* `device_meshes`, `distribute_model`, `dtensor`, `placement`: the plan's
  DeviceMeshes and DTensors, local shards read from safetensors slices;
* `checkpoint_metadata`: the plan's DCP `Metadata`; `chunk_writers`, `aliases`;
* `Groups`, `all_gather`, `allgather_unit`, `allgather_group`: the plan's
  FSDP2 and muon all-gathers with real collectives (raw bytes, any dtype);
* `apply_fully_shard`, `fsdp2_mismatches`: FSDP2 by the plan's units, and
  FSDP2's own sharding compared with the rank file;
* `model_mismatches`, `check_model`: the module's parameters (names, shapes,
  dtypes, ties, frozen params) against the plan, before anything changes;
  `check_launch`: the process group exists and has the plan's world size;
* `reshard`: a `shardc reshard` listing executed with isend/irecv;
* `to_torch`, `to_storage`, `local_tensors`: numpy storage <-> torch tensors;
* `apply_local_attributes`: tells attention, expert and vocab-parallel embedding
  modules what the rank holds (the rank file's `local_attributes`).

PyTorch's private helpers (`_StridedShard`, `compute_local_shape_and_global_offset`)
are imported only in `dtensor.py`.
"""

from .attributes import apply_local_attributes
from .collectives import Groups, all_gather, allgather_flat, allgather_group, allgather_unit
from .dcp import aliases, checkpoint_metadata, chunk_writers, write_items
from .dtensor import (check_launch, check_layout, device_meshes, distribute_model, dtensor,
                      param_mesh, placement)
from .fsdp import apply_fully_shard, fsdp2_mismatches
from .model import check_model, model_mismatches
from .reshard import reshard
from .tensors import local_tensors, to_storage, to_torch, torch_dtype

__all__ = [
    "Groups", "aliases", "all_gather", "allgather_flat", "allgather_group", "allgather_unit",
    "apply_fully_shard", "apply_local_attributes",
    "check_launch", "check_layout", "check_model", "fsdp2_mismatches", "model_mismatches",
    "checkpoint_metadata", "chunk_writers", "device_meshes", "distribute_model", "dtensor",
    "local_tensors", "param_mesh", "placement", "reshard", "to_storage", "to_torch",
    "torch_dtype", "write_items",
]
