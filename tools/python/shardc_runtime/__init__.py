"""shardc_runtime: consume a shardc plan from a PyTorch (or plain numpy) runtime.

Reads `shardc compile` outputs (plan.json, rank files, manifest.json) and does
what they say: load a rank's shards from safetensors, run the FSDP2 and muon
all-gathers on their layouts, give DCP-shaped checkpoint metadata, and execute
a `shardc reshard` listing with send/recv. Standard library + numpy; torch is
imported only by the functions that need it (collectives, to_torch).

    from shardc_runtime import OutDir, load_rank
    out = OutDir("out/qwen")                   # refuses an incomplete compile
    me = out.rank(rank)                        # RankFile: params, layouts
    shards = load_rank(me, "model.safetensors")  # only this rank's bytes

See tools/python/README.md and the README section "Use the plan from PyTorch".
"""

from .collectives import Groups, all_gather
from .dcp import checkpoint_metadata, write_items
from .dtypes import element_size, storage_dtype, to_torch
from .fsdp2 import allgather_unit, pack_unit, unpack_unit
from .layout import Box, Fsdp2Unit, MuonGroup, OutDir, ParamInfo, PlanError, RankFile
from .load import LoadedRank, load_rank, local_tensors
from .muon import allgather_group, check_written, slice_back
from .reshard import reshard
from .safetensors_io import Checkpoint, write_file

__all__ = [
    "Box", "Checkpoint", "Fsdp2Unit", "Groups", "LoadedRank", "MuonGroup", "OutDir",
    "ParamInfo", "PlanError", "RankFile", "all_gather", "allgather_group", "allgather_unit",
    "check_written", "checkpoint_metadata", "element_size", "load_rank", "local_tensors",
    "pack_unit", "reshard", "slice_back", "storage_dtype", "to_torch", "unpack_unit",
    "write_file", "write_items",
]
