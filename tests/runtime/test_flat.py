"""Flat optimizer buffers (megatron_distopt, deepspeed_zero) against the frameworks' rules.

For every rank of the cases/megatron_distopt plans, the buffers the adapter builds from
the rank file and a random checkpoint (shardc_runtime.flat.build_buffer) are cut into
each DP member's shards; the shards of all members of a DP group, reassembled bucket by
bucket (the param all-gather), must equal byte for byte the buffer that Megatron-Core's
or DeepSpeed's own layout rules give for the rank's local tensors — the rules transcribed
below from their sources, independently of shardc:
  Megatron-Core (NVIDIA/Megatron-LM d98e8a64): optimizer/distrib_optimizer.py
    DistributedOptimizer._compute_per_buffer_param_layout and
    _build_model_gbuf_param_range_map; optimizer/param_layout.py pad_param_start,
    pad_bucket_end; distributed/param_and_grad_buffer.py group_params_for_buffers;
    training/training.py (no bucketing on pp ranks > 0 and model chunks > 0);
    models/common/language_module/language_module.py (shared_embedding).
  DeepSpeed (deepspeedai/DeepSpeed edaa7221): runtime/zero/stage_1_and_2.py (flat group
    aligned to nccl_start_alignment_factor 2 x dp, get_data_parallel_partitions),
    runtime/zero/partition_parameters.py (_padding_size, _partition_param).
The owned ranges each rank file lists must be Megatron's param ranges of its shard, and
over each DP group every element of every param must be owned exactly once.
(megatron-core is not installed: the registry's newest release for this Python, 0.16.1,
predates param_layout.py and computes the layout inside _ParamAndGradBuffer.__init__,
which needs process groups and CUDA; the transcription cites the commit instead.)
"""

from __future__ import annotations

import math
import os
from typing import Any

import harness
import numpy as np
import pytest

import shardc_runtime as sr
from shardc_runtime import dtypes, flat

CASE = os.path.join(harness.HERE, "cases", "megatron_distopt")
RECIPES = ["recipe.yaml", "recipe_ds2.yaml", "recipe_ds3.yaml"]
Array = Any


# ---------------------------------------------------------------- Megatron-Core's rules --

def megatron_layout(numels: list[int], shared: list[bool], bucket_size: int | None,
                    dp: int, pad_for_high_nccl_busbw: bool = False
                    ) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]]:
    """_compute_per_buffer_param_layout over params in model order: per param
    (start, end, bucket_id), and the buckets (start, end), as Megatron returns them."""
    def pad(v: int, d: int) -> int:
        return int(math.ceil(v / d) * d)
    divisor = math.lcm(dp, 128, 2**16) if pad_for_high_nccl_busbw else math.lcm(dp, 128)
    index: dict[int, tuple[int, int, int]] = {}
    buckets: list[tuple[int, int]] = []
    param_start = bucket_start = bucket_id = 0
    param_end = 0
    bucket_params: set[int] = set()
    for i in reversed(range(len(numels))):
        param_start = pad(param_start, 64)
        if shared[i] and bucket_params:
            end = pad(param_start, divisor)
            buckets.append((bucket_start, end))
            bucket_start, bucket_id, bucket_params = end, bucket_id + 1, set()
            param_start = bucket_start
        param_end = param_start + numels[i]
        index[i] = (param_start, param_end, bucket_id)
        bucket_params.add(i)
        if (bucket_size is not None and param_end - bucket_start >= bucket_size) or shared[i]:
            end = pad(param_end, divisor)
            buckets.append((bucket_start, end))
            bucket_start, bucket_id, bucket_params = end, bucket_id + 1, set()
            param_start = bucket_start
        else:
            param_start = param_end
    if bucket_params:
        buckets.append((bucket_start, pad(param_end, divisor)))
    return [index[i] for i in range(len(numels))], buckets


def megatron_ranges(index: list[tuple[int, int, int]], bucket: tuple[int, int], bucket_id: int,
                    dp: int, dp_rank: int) -> list[tuple[int, int, int, int]]:
    """_build_model_gbuf_range + _build_model_gbuf_param_range_map: per param of the
    bucket in the shard, (param index, "param" range start, "gbuf_world" range start, numel)."""
    size = (bucket[1] - bucket[0]) // dp
    lo, hi = bucket[0] + dp_rank * size, bucket[0] + (dp_rank + 1) * size
    out = []
    for i, (start, end, b) in enumerate(index):
        if b != bucket_id:
            continue
        local_start, local_end = max(0, start - lo), min(size, end - lo)
        if local_end > local_start:
            out.append((i, max(0, lo - start), local_start + lo, local_end - local_start))
    return out


# ------------------------------------------------------------------- DeepSpeed's rules --

def deepspeed_flat(numels: list[int], dp: int) -> tuple[list[int], int]:
    """stage_1_and_2.py: params flattened in order, padded to 2 x dp: starts, total."""
    starts, at = [], 0
    for n in numels:
        starts.append(at)
        at += n
    return starts, int(math.ceil(at / (2 * dp))) * 2 * dp


def deepspeed_partition(n: int, dp: int) -> int:
    """partition_parameters.py: partition size of a param of n elements."""
    return (n + (dp - n % dp if n % dp else 0)) // dp


# ------------------------------------------------------------------------------ plumbing --

@pytest.fixture(scope="module")
def compiled(shardc: str, tmp_path_factory: Any) -> dict[str, tuple[sr.OutDir, dict[int, Any]]]:
    out = {}
    for recipe in RECIPES:
        d = str(tmp_path_factory.mktemp(recipe.replace(".", "_")))
        harness.compile_plan(shardc, os.path.join(CASE, "model.yaml"), os.path.join(CASE, recipe),
                             d)
        ckpt = os.path.join(d, "model.safetensors")
        harness.write_checkpoint(d, ckpt, seed=7)
        od = sr.OutDir(d)
        loaded = {r: sr.load_rank(od.rank(r), ckpt) for r in range(od.world_size)}
        out[recipe] = (od, loaded)
    return out


def dp_members(od: sr.OutDir, rank: int, mesh: str) -> list[int]:
    """The ranks that differ from `rank` only on the case's data-parallel axis
    (dp on the dense mesh, edp on the expert mesh), by that coordinate."""
    me = od.rank(rank).coords[mesh]
    axis = "edp" if mesh == "expert" else "dp"
    out = []
    for q in range(od.world_size):
        c = od.rank(q).coords[mesh]
        if all(c[a] == me[a] for a in me if a != axis):
            out.append((c[axis], q))
    return [q for _, q in sorted(out)]


def buffer_params(od: sr.OutDir, rf: sr.RankFile, megatron: bool) -> dict[tuple, list[Any]]:
    """The rank's trainable params grouped as the frameworks group them, model order:
    (model chunk, dtype, grad dtype, expert) -> [ParamInfo]."""
    plan = {p["name"]: p for p in od.plan["params"]}
    grad = od.plan["summary"]["per_rank_memory"]["training"].get("grad_dtype")
    groups: dict[tuple, list[Any]] = {}
    for p in rf.params.values():
        if p.alias_of is not None or not p.requires_grad:
            continue
        spec = plan[p.name]
        expert = spec["mesh"] == "expert" or p.stacked_from is not None
        chunk = spec.get("virtual_stage", 0) if megatron else 0
        key = (chunk, p.dtype, grad or p.dtype, expert)
        groups.setdefault(key, []).append(p)
    return groups


def pieces_of(p: Any, tensor: Array) -> list[tuple[str, int, int]]:
    """(name, param_offset, numel) of the buffer's tensor of `p`: a stacked param's
    local experts (dim 0), else the whole tensor."""
    n = int(tensor.size)
    if p.stacked_from is not None and tensor.ndim and tensor.shape[0] > 1:
        per = n // tensor.shape[0]
        return [(p.name, e * per, per) for e in range(tensor.shape[0])]
    return [(p.name, 0, n)]


def local(loaded: dict[int, Any], rank: int, name: str) -> Array:
    """Rank `rank`'s real elements of `name` (its padded array cut to local_shape)."""
    info = loaded[rank].info.params[name]
    return loaded[rank].arrays[name][tuple(slice(0, n) for n in info.local_shape)]


def unsharded(od: sr.OutDir, loaded: dict[int, Any], members: list[int], name: str) -> Array:
    """ZeRO-3: the TP-local tensor, the members' FSDP shards (dim 0, the recipe's
    `fsdp.dim`) concatenated in FSDP order; a param every member holds whole as is."""
    parts = [local(loaded, q, name) for q in members]
    offsets = {tuple(loaded[q].info.params[name].global_offset) for q in members}
    if len(offsets) == 1:
        return parts[0]
    return np.concatenate(parts, axis=0)


# --------------------------------------------------------------------------------- tests --

@pytest.mark.parametrize("recipe", RECIPES)
def test_reassembled_buffers(compiled: dict[str, Any], recipe: str) -> None:
    od, loaded = compiled[recipe]
    megatron = recipe == "recipe.yaml"
    stage3 = recipe == "recipe_ds3.yaml"
    bucket_cap = 600  # recipe.yaml's bucket_size
    checked = 0
    for r in range(od.world_size):
        rf = od.rank(r)
        assert rf.flat, f"rank {r}: no flat buffers in its rank file"
        groups = buffer_params(od, rf, megatron)
        keys = sorted(groups, key=lambda k: k[0]) if megatron else list(groups)
        assert [(fb.model_chunk, fb.param_dtype, fb.grad_dtype, fb.expert) for fb in rf.flat] \
            == keys, f"rank {r}: buffers are not one per (chunk, dtype, grad dtype, expert)"
        for fb, key in zip(rf.flat, keys):
            members = dp_members(od, r, "expert" if fb.expert and "expert" in rf.coords
                                 else "dense")
            assert list(fb.ranks) == members, f"rank {r}: DP group {fb.ranks} != {members}"
            dp = len(members)
            # The rank's local tensors (ZeRO-3: rebuilt from the group's FSDP shards).
            mine = {p.name: (unsharded(od, loaded, members, p.name) if stage3
                             else local(loaded, r, p.name)) for p in groups[key]}
            pieces = [pc for p in groups[key] for pc in pieces_of(p, mine[p.name])]
            numels = [n for _, _, n in pieces]
            ref = np.zeros(fb.numel, dtype=np.ascontiguousarray(mine[pieces[0][0]]).dtype)
            if megatron:
                shared = [name in ("embedding.word_embeddings.weight", "output_layer.weight")
                          for name, _, _ in pieces]
                cap = bucket_cap if rf.stage == 0 and key[0] == 0 else None
                index, buckets = megatron_layout(numels, shared, cap, dp)
                assert [(b[0], b[1]) for b in fb.buckets] == buckets, f"rank {r}: buckets"
                starts = [s for s, _, _ in index]
            elif stage3:
                starts, at, buckets = [], 0, []
                for n in numels:
                    starts.append(at)
                    buckets.append((at, at + deepspeed_partition(n, dp) * dp))
                    at = buckets[-1][1]
                assert [(b[0], b[1]) for b in fb.buckets] == buckets, f"rank {r}: partitions"
            else:
                starts, total = deepspeed_flat(numels, dp)
                assert [(b[0], b[1]) for b in fb.buckets] == [(0, total)], f"rank {r}: group"
            for (name, off, n), s in zip(pieces, starts):
                src = np.ascontiguousarray(mine[name]).reshape(-1)
                ref[s:s + n] = src[off:off + n].view(ref.dtype)
            # Every member builds its buffer from its own data; the shards reassemble it.
            shards = []
            for q in members:
                mf = next(b for b in od.rank(q).flat if (b.model_chunk, b.param_dtype,
                                                         b.grad_dtype, b.expert) == key)
                mlocal = {p.name: (unsharded(od, loaded, members, p.name) if stage3
                                   else local(loaded, q, p.name)) for p in groups[key]}
                shards.append(flat.shard(mf, flat.build_buffer(mf, mlocal)))
            whole = flat.assemble(fb, shards)
            assert whole.tobytes() == ref.tobytes(), f"rank {r}: reassembled buffer differs"
            # Owned ranges: Megatron's param ranges of this rank's shard.
            if megatron:
                # Megatron's ranges by buffer position; the rank file's pieces are in
                # buffer order, the reverse of the model order `index` is in.
                want = []
                for j, b in enumerate(buckets):
                    want += [(world, len(pieces) - 1 - i, p_off + pieces[i][1], n)
                             for i, p_off, world, n in megatron_ranges(index, b, j, dp, fb.index)]
                want.sort()
                assert [(o[3], o[0], o[1], o[2]) for o in fb.owned] == want, f"rank {r}: owned"
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("recipe", RECIPES)
def test_owned_exactly_once(compiled: dict[str, Any], recipe: str) -> None:
    od, _ = compiled[recipe]
    for r in range(od.world_size):
        for fb in od.rank(r).flat:
            counts: dict[str, np.ndarray] = {}
            sizes: dict[str, int] = {}
            for pc in fb.pieces:
                sizes[pc.name] = max(sizes.get(pc.name, 0), pc.param_offset + pc.numel)
            padding = fb.numel - sum(pc.numel for pc in fb.pieces)
            held = 0
            for q in fb.ranks:
                mf = next(b for b in od.rank(q).flat if b.model_chunk == fb.model_chunk and
                          b.param_dtype == fb.param_dtype and b.expert == fb.expert)
                held += mf.shard_numel - mf.owned_numel
                for name, off, n, _ in flat.owned_ranges(mf):
                    c = counts.setdefault(name, np.zeros(sizes[name], dtype=np.int64))
                    c[off:off + n] += 1
            assert sorted(counts) == sorted(sizes)
            for name, c in counts.items():
                assert (c == 1).all(), f"rank {r} {name}: elements owned {set(c.tolist())} times"
            assert held == padding, f"rank {r}: shards hold {held} padding elements, not {padding}"


def test_memory_counts_the_layout(compiled: dict[str, Any]) -> None:
    """plan.json's per-rank buffer bytes are the layout's: pack = the rank's shards,
    gathered = the whole buffers, in the param dtype (padding counted)."""
    od, _ = compiled["recipe.yaml"]
    stats = od.plan["summary"]["per_rank_buffer_bytes"]
    (entry,) = [s for s in stats if s["kind"] == "megatron_distopt"]
    packs = [sum(fb.shard_numel * dtypes.element_size(fb.param_dtype)
                 for fb in od.rank(r).flat) for r in range(od.world_size)]
    wholes = [sum(fb.numel * dtypes.element_size(fb.param_dtype)
                  for fb in od.rank(r).flat) for r in range(od.world_size)]
    assert entry["pack"]["max"] == max(packs) and entry["pack"]["min"] == min(packs)
    assert entry["gathered"]["max"] == max(wholes) and entry["gathered"]["min"] == min(wholes)
