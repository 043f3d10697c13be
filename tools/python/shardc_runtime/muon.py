"""Muon all-gather by the plan's `muon_allgather` layout (contract §6.3).

For each group and batch, stages run innermost split first. At stage s each
param's current piece (initially its unpadded local shard) has `tensor_dim`
moved to dim 0 and is written at `offset` of a per-rank slot of
`total_numel[s]` elements (the batch dtype), zero-filled to `padded_numel`:
numel(pad_shape) rounded up to alignment_bytes / element_size elements, where
pad_shape is the input shape with tensor_dim set to max(split_sizes[s]). After
the all-gather, member k contributes its first split_sizes[s][k] x rest
elements; concatenated and moved back they are the next stage's input. After
the last stage every param is its global tensor; `slice_back` cuts this rank's
piece out of a full tensor (last stage first).

Every derived value (offsets, padded sizes, totals, shapes) is computed from
split_sizes and the local shape, so the lean and full rank-file forms are used
alike; with the full form `check_written` compares them with what was written.
"""

import numpy as np

from . import dtypes
from .collectives import all_gather
from .layout import PlanError, numel


def _align_elems(group, dtype):
    return max(1, group.alignment_bytes // dtypes.element_size(dtype))


def stage_layout(group, batch, s, shapes):
    """{name: (offset, padded_numel, input shape)} of stage s of `batch`, and the
    slot total, from the current `shapes` {name: input shape at stage s}."""
    d, out, off = group.stages[s].tensor_dim, {}, 0
    for name in batch.params:
        shape = list(shapes[name])
        pad = shape[:]
        pad[d] = max(group.split_sizes[name][s])
        a = _align_elems(group, batch.dtype)
        padded = -(-numel(pad) // a) * a
        out[name] = (off, padded, shape)
        off += padded
    return out, off


def input_shapes(group, batch, rank_file, s):
    """Input shape of each param of `batch` at stage s: local_shape with every
    earlier stage's tensor_dim set to that stage's gathered extent."""
    shapes = {}
    for name in batch.params:
        shape = list(rank_file.params[name].local_shape)
        for t in range(s):
            shape[group.stages[t].tensor_dim] = sum(group.split_sizes[name][t])
        shapes[name] = shape
    return shapes


def check_written(group, rank_file):
    """Compare derived offsets / padded_numel / actual_numel / totals with the
    full form's written fields; raises PlanError on the first difference."""
    for bi, batch in enumerate(group.batches):
        for s in range(len(group.stages)):
            lay, total = stage_layout(group, batch, s, input_shapes(group, batch, rank_file, s))
            if total != batch.total_numel[s]:
                raise PlanError(f"muon {group.key} batch {bi} stage {s}: total_numel "
                                f"{batch.total_numel[s]} != derived {total}")
            for name, (off, padded, shape) in lay.items():
                w = group.written.get((bi, s, name))
                if w and (w["offset"], w["padded_numel"], w["actual_numel"]) != (off, padded, numel(shape)):
                    raise PlanError(f"muon {name} stage {s}: written offset/padded/actual "
                                    f"{w['offset']}/{w['padded_numel']}/{w['actual_numel']} != "
                                    f"derived {off}/{padded}/{numel(shape)}")


def pack_stage(group, batch, s, current):
    """uint8 slot of stage s from {name: current piece}; returns (slot, layout)."""
    layout, total = stage_layout(group, batch, s, {n: current[n].shape for n in batch.params})
    if total != batch.total_numel[s]:
        raise PlanError(f"muon {group.key} stage {s}: total_numel {batch.total_numel[s]} != "
                        f"derived {total}")
    st, sdt = group.stages[s], dtypes.storage_dtype(batch.dtype)
    slot = np.zeros(total, dtype=sdt)
    for name, (off, _, shape) in layout.items():
        if shape[st.tensor_dim] != group.split_sizes[name][s][st.index]:
            raise PlanError(f"muon {name} stage {s}: piece extent {shape[st.tensor_dim]} != "
                            f"split_sizes[{st.index}] {group.split_sizes[name][s][st.index]}")
        piece = np.moveaxis(current[name], st.tensor_dim, 0).reshape(-1)
        slot[off:off + piece.size] = piece
    return slot.view(np.uint8), layout


def unpack_stage(group, batch, s, gathered, layout):
    """{name: gathered piece} from the [G, slot bytes] uint8 all-gather output."""
    st, sdt = group.stages[s], dtypes.storage_dtype(batch.dtype)
    out = {}
    for name, (off, _, shape) in layout.items():
        rest = list(np.moveaxis(np.empty(shape, dtype=np.uint8), st.tensor_dim, 0).shape[1:])
        parts = []
        for k, size in enumerate(group.split_sizes[name][s]):
            row = gathered[k].view(sdt)
            parts.append(row[off:off + size * numel(rest)].reshape([size] + rest))
        out[name] = np.ascontiguousarray(np.moveaxis(np.concatenate(parts, axis=0), 0, st.tensor_dim))
    return out


def allgather_group(groups, group, rank_file, arrays):
    """Run every batch's stages with real all-gathers; returns {name: full
    (global) tensor} for the group's params. `arrays`: {name: local shard or
    padded shard} (the unpadded local view is taken)."""
    full = {}
    for batch in group.batches:
        current = {}
        for n in batch.params:
            p = rank_file.params[n]
            current[n] = np.ascontiguousarray(arrays[n][tuple(slice(0, k) for k in p.local_shape)])
        for s, st in enumerate(group.stages):
            slot, layout = pack_stage(group, batch, s, current)
            gathered = all_gather(groups, st.ranks, slot)
            current = unpack_stage(group, batch, s, gathered, layout)
        full.update(current)
    for n in group.params:  # a group with no sharding stage: every rank holds the full tensor
        if n not in full and not group.stages:
            full[n] = np.array(arrays[n])
    return full


def slice_back(group, name, full):
    """This rank's piece of a full tensor (e.g. the owner's update), last stage
    first: narrow(tensor_dim, sum(split_sizes[s][:index]), split_sizes[s][index])."""
    out = full
    for s in reversed(range(len(group.stages))):
        st, sizes = group.stages[s], group.split_sizes[name][s]
        start = sum(sizes[:st.index])
        out = np.take(out, range(start, start + sizes[st.index]), axis=st.tensor_dim)
    return out


def rank_lists(rank_file):
    """Every group rank list the rank's muon and FSDP2 layouts gather over."""
    lists = [st.ranks for g in rank_file.muon for st in g.stages]
    return lists + [u.ranks for u in rank_file.fsdp2]
