"""Local attributes a runtime sets on a sharded module, derived from the rank file.

The rank file does not (yet) carry them (issue 28 item 5 plans a C++ change), so
the adapter derives them from the plan's shapes and the model's attributes:

* `expert_ids(outdir, rank_file)`: per stacked expert param (`stacked_from`), the
  global expert ids this rank serves (its EP-local range of the expert dim; empty on
  an EP rank without experts; with expert FSDP on the expert dim, the range the
  FSDP2 all-gather rebuilds, not the rank's FSDP piece).
* `vocab_range(outdir, rank_file, name)`: the token ids a vocab-parallel embedding
  or head holds (its TP-local dim-0 range, the same rule).
* `head_counts(rank_file, num_attention_heads, num_key_value_heads)`: per
  attention module (the parent of `q_proj` / `k_proj`), the local query and KV
  head counts of its TP-local projections: TP-local rows / head_dim with head_dim
  = global rows / the model's head count. The TP-local rows are the FSDP2 unit's
  `unsharded_shape` (what the forward sees after FSDP2's all-gather), else the
  local shape.

Hugging Face Llama-style attention in transformers 5.24 infers the local head
count from the tensor (`view(..., -1, head_dim)`), so tests/runtime/test_hf.py
runs a sharded forward without setting any; these values are for modules that
store the counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import PlanError
from .layout import OutDir, RankFile
from .rankset import parse_rank_set


@dataclass(frozen=True)
class Heads:
    """Local head counts of one attention module on one rank."""

    query: int
    key_value: int


def local_range(outdir: OutDir, rank_file: RankFile, name: str) -> range:
    """The dim-0 range of param `name` that this rank's TP / EP shard covers (what
    the forward sees after FSDP2's all-gather): with an FSDP2 unit sharding dim 0,
    the unit's unsharded extent from where its first member's piece starts
    (plan.json's shard of that member); else this rank's own rows. Refused when
    FSDP splits a TP / EP shard's dim 0 (`_StridedShard(0, ...)`) and no unit says
    the TP-local extent."""
    info = rank_file.params[name]
    member = next(((u, m) for u in rank_file.fsdp2 for m in u.params
                   if m.name == name and m.shard_dim == 0), None)
    if member is None:
        if any(label.startswith("_StridedShard(0") for label in outdir.params[name]["placements"]):
            raise PlanError(f"{name}: FSDP splits the TP/EP shard's dim 0 but no fsdp2_allgather "
                            "unit lists it, so the rank file does not say the TP/EP-local "
                            "range; declare the units in the recipe")
        count = info.local_shape[0]
        return range(info.global_offset[0], info.global_offset[0] + count) if count else range(0)
    unit, entry = member
    count = entry.unsharded_shape[0]
    holder = unit.ranks[0]
    shard = next((s for s in outdir.params[name]["shards"]
                  if holder in parse_rank_set(s["ranks"], outdir.world_size,
                                              f"plan.json {name} shards")), None)
    if shard is None:
        raise PlanError(f"plan.json lists no shard of {name} for rank {holder}")
    first = shard["global_offset"][0]
    return range(first, first + count) if count else range(0)


def expert_ids(outdir: OutDir, rank_file: RankFile) -> dict[str, range]:
    """{stacked param: the global expert ids this rank serves}: its EP-local expert
    range (`local_range` of the expert dim; with expert FSDP on the expert dim, the
    range the FSDP2 all-gather rebuilds, not the rank's FSDP piece)."""
    return {name: local_range(outdir, rank_file, name) for name, info in rank_file.params.items()
            if info.stacked_from is not None}


def vocab_range(outdir: OutDir, rank_file: RankFile, name: str) -> range:
    """The token ids a vocab-parallel embedding or output head `name` (vocab on
    dim 0) holds on this rank after FSDP2's all-gather: its `local_range`."""
    return local_range(outdir, rank_file, name)


def _tp_rows(rank_file: RankFile, name: str) -> int:
    for unit in rank_file.fsdp2:
        for member in unit.params:
            if member.name == name:
                return member.unsharded_shape[0]
    return rank_file.params[name].local_shape[0]


def head_counts(rank_file: RankFile, num_attention_heads: int,
                num_key_value_heads: int | None = None) -> dict[str, Heads]:
    """{attention module: Heads} for every module with a `q_proj.weight` and a
    `k_proj.weight` on this rank; PlanError when a TP shard cuts a head."""
    kv_heads = num_key_value_heads or num_attention_heads
    out = {}
    for name in rank_file.params:
        module = name.removesuffix(".q_proj.weight")
        if module == name or f"{module}.k_proj.weight" not in rank_file.params:
            continue
        counts = []
        for proj, heads in (("q_proj", num_attention_heads), ("k_proj", kv_heads)):
            pname = f"{module}.{proj}.weight"
            rows, total = _tp_rows(rank_file, pname), rank_file.params[pname].global_shape[0]
            if total % heads or rows % (total // heads):
                raise PlanError(f"{pname}: {rows} TP-local rows of {total} are not whole heads "
                                f"of {total // heads if total % heads == 0 else '?'} rows")
            counts.append(rows // (total // heads))
        out[module] = Heads(counts[0], counts[1])
    return out
