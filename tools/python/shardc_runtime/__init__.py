"""shardc_runtime: use a shardc plan from a PyTorch (or plain numpy) runtime.

Reads `shardc compile` outputs (manifest.json, plan.json, rank files), refusing
what `shardc verify` refuses, and loads a rank's shards from safetensors
(only its bytes). The numpy side (this package) packs and unpacks the plan's
FSDP2 and muon buffers and the flat ZeRO / Megatron
distributed-optimizer buffers, and plans a reshard's messages; `shardc_runtime.torch`
builds DeviceMeshes, DTensors and DCP `Metadata` and runs the collectives.

    from shardc_runtime import OutDir, load_rank
    out = OutDir("out/qwen")                     # refuses an incomplete compile
    me = out.rank(rank)                          # RankFile: params, layouts
    shards = load_rank(me, "model.safetensors")  # only this rank's bytes

See tools/python/README.md.
"""

from .attributes import (Experts, Heads, LocalAttributes, Vocab, expert_ids, head_counts,
                         local_attributes, vocab_padding, vocab_range)
from .errors import CheckpointError, PlanError
from .flat import assemble, build_buffer, owned_ranges, shard
from .fsdp2 import pack_unit, unpack_unit
from .layout import Box, FlatBuffer, FlatPiece, Fsdp2Unit, MuonGroup, OutDir, ParamInfo, RankFile
from .load import LoadedRank, load_rank
from .muon import slice_back
from .rankset import RankList, RankSet, parse_rank_list, parse_rank_set
from .safetensors_io import Checkpoint, write_file

__all__ = [
    "Box", "Checkpoint", "CheckpointError", "Experts", "FlatBuffer", "FlatPiece", "Fsdp2Unit",
    "Heads", "LoadedRank", "LocalAttributes", "MuonGroup", "OutDir", "ParamInfo", "PlanError",
    "RankFile", "RankList", "RankSet", "Vocab", "assemble", "build_buffer", "expert_ids",
    "head_counts", "load_rank", "local_attributes", "owned_ranges", "pack_unit",
    "parse_rank_list", "parse_rank_set", "shard", "slice_back", "unpack_unit", "vocab_padding",
    "vocab_range", "write_file",
]
