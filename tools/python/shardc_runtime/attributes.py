"""Local attributes a runtime sets on a sharded module, derived from the rank file.

The rank file does not (yet) carry them (issue 28 item 5 plans a C++ change), so
the adapter derives them from the plan's shapes and the model's attributes:

* `expert_ids(rank_file)`: per stacked expert param (`stacked_from`), the global
  expert ids this rank holds: range(offset[0], offset[0] + local_shape[0]) of the
  expert dim (EP Shard(0); empty on an EP rank without experts).
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
from .layout import RankFile


@dataclass(frozen=True)
class Heads:
    """Local head counts of one attention module on one rank."""

    query: int
    key_value: int


def expert_ids(rank_file: RankFile) -> dict[str, range]:
    """{stacked param: the global expert ids this rank holds}."""
    out = {}
    for name, info in rank_file.params.items():
        if info.stacked_from is None:
            continue
        first = info.global_offset[0] if info.local_shape[0] else info.global_shape[0]
        out[name] = range(first, first + info.local_shape[0])
    return out


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
