"""One rank of a runtime test (spawned by harness.launch).

Joins gloo on 127.0.0.1, then runs the spec's tasks in order with real
collectives, printing one `MISMATCH ...` line per failed check and exiting 1
when any check failed:

* plan: load this rank's shards with the adapter (only its bytes), all-gather
  every rank's shards and rebuild every tensor bit for bit with each element
  held exactly the plan's replica count; FSDP2 units and muon groups gathered
  on their layouts' groups; DCP chunk metadata tiles every tensor once; the
  ZeRO-1/2 flat optimizer buffers' shards all-gathered over their DP groups.
* reshard: plan-A holders send to plan-B ranks exactly what the `shardc
  reshard` listing names; every plan-B shard ends equal to the checkpoint.
"""

import argparse
import datetime
import json
import os
import sys
import threading
import time

T0 = time.monotonic()


def watchdog(limit):
    """Exit when the launcher dies (so no worker outlives a killed test) or after
    `limit` seconds, whatever the main thread is blocked in."""
    parent = os.getppid()

    def watch():
        while True:
            if os.getppid() != parent or time.monotonic() - T0 > limit:
                print(f"worker: {'launcher gone' if os.getppid() != parent else 'time limit'}, "
                      "exiting", flush=True)
                os._exit(3)
            time.sleep(0.5)
    threading.Thread(target=watch, daemon=True).start()


# Run as a script (harness's fallback launch): the watchdog starts before torch is
# imported (seconds on a busy machine), so a worker whose launcher was killed exits even
# while still importing. Forked from the fork server, entry() starts it.
if __name__ == "__main__":
    watchdog(float(os.environ.get("SHARDC_WORKER_TIMEOUT", "330")))

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                "python"))
from shardc_runtime import Checkpoint, OutDir, PlanError, load_rank, slice_back  # noqa: E402
from shardc_runtime.dtypes import element_size as dtypes_size  # noqa: E402
from shardc_runtime.flat import build_buffer as flat_buffer, owned_ranges  # noqa: E402
from shardc_runtime.layout import numel  # noqa: E402
from shardc_runtime.torch import (Groups, allgather_flat, allgather_group,  # noqa: E402
                                  allgather_unit, checkpoint_metadata, chunk_writers, reshard)

FAILURES: list[str] = []


def fail(msg):
    FAILURES.append(msg)
    print("MISMATCH " + msg, flush=True)


def same(a, b):
    """Bit-for-bit equality of two arrays (shape and bytes)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and a.tobytes() == b.tobytes()


def box(a, offset, shape):
    return a[tuple(slice(o, o + s) for o, s in zip(offset, shape))]


class Reference:
    """Global tensors straight from the checkpoint (whole-tensor reads: test side
    only), resolving stacked experts and ties from plan.json independently of
    the adapter's load path."""

    def __init__(self, outdir, ckpt_path):
        self.plan = outdir.plan
        self.params = {p["name"]: p for p in self.plan["params"]}
        self.ties = {t["alias"]: t["source"] for t in self.plan.get("tie_sync_groups", [])}
        self.ck, self.cache = Checkpoint(ckpt_path), {}

    def get(self, name):
        if name not in self.cache:
            p = self.params.get(name, {})
            if name in self.ck:
                v = self.ck.read_full(name)
            elif p.get("stacked_from"):
                v = np.stack([self.ck.read_full(s) for s in p["stacked_from"]["sources"]])
            elif p.get("alias_of") or name in self.ties:
                v = self.get(p.get("alias_of") or self.ties[name])
            else:
                raise KeyError(f"{name} not in checkpoint")
            self.cache[name] = v
        return self.cache[name]


def replica_count(plan, p):
    """Ranks holding each element of p, from placements alone: the product of
    the sizes of its mesh's axes that shard nothing, the pipeline axis excluded."""
    mesh = plan["meshes"][p["mesh"]]
    pp = (plan.get("pipeline") or {}).get("axis")
    n = 1
    for axis, pl in zip(mesh, p["placements"]):
        if pl.startswith("Replicate") and axis["name"] != pp:
            n *= axis["size"]
    return n


def gather_shards(me, loaded, rank, world):
    """All-gather (metadata, bytes) of every rank's unpadded shards."""
    meta, parts = {}, []
    if me is not None:
        for p in me.params.values():
            local = loaded.local(p.name)
            boxes = []
            for b in p.boxes:  # one box, or several for a packed param
                a = np.ascontiguousarray(box(local, b.local_offset, b.shape))
                boxes.append((b.shape, b.global_offset, a.nbytes, b.local_offset))
                parts.append(a.reshape(-1).view(np.uint8))
            meta[p.name] = {"local_shape": p.local_shape, "global_offset": p.global_offset,
                            "boxes": boxes}
    data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    metas = [None] * world
    dist.all_gather_object(metas, {"meta": meta, "n": int(data.size)})
    longest = max(m["n"] for m in metas)
    buf = torch.zeros(max(longest, 1), dtype=torch.uint8)
    buf[:data.size] = torch.from_numpy(data)
    outs = [torch.empty_like(buf) for _ in range(world)]
    dist.all_gather(outs, buf)
    return metas, [o.numpy() for o in outs]


def check_rebuild(out, ref, metas, blobs, label):
    """Every tensor rebuilt bit for bit, every element held replica_count times."""
    plan = out.plan
    vals = {p["name"]: np.zeros_like(ref.get(p["name"])) for p in plan["params"]}
    counts = {n: np.zeros(v.shape, np.int32) for n, v in vals.items()}
    for r, m in enumerate(metas):
        pos = 0
        for name, shape, offset, nbytes, _ in [(n, *b) for n, x in m["meta"].items() for b in x["boxes"]]:
            piece = blobs[r][pos:pos + nbytes].view(vals[name].dtype).reshape(shape)
            pos += nbytes
            target = box(vals[name], offset, shape)
            if box(counts[name], offset, shape).max() > 0 and not np.array_equal(
                    target[box(counts[name], offset, shape) > 0],
                    piece[box(counts[name], offset, shape) > 0]):
                fail(f"{label}: {name}: rank {r} disagrees with another replica")
            target[...] = piece
            box(counts[name], offset, shape)[...] += 1
    for p in plan["params"]:
        name, want = p["name"], replica_count(plan, p)
        if not same(vals[name], ref.get(name)):
            bad = np.argwhere(vals[name] != ref.get(name))
            fail(f"{label}: {name}: all-gathered shards differ from the checkpoint at "
                 f"{len(bad)} elements, first {bad[0].tolist() if len(bad) else '?'}")
        if counts[name].size and not (counts[name] == want).all():
            fail(f"{label}: {name}: elements held {sorted(set(counts[name].ravel().tolist()))} "
                 f"times, plan replica count {want}")


def check_fsdp2(out, me, loaded, groups, ref, metas, label):
    for unit in me.fsdp2:
        got = allgather_unit(groups, unit, me, loaded.arrays)
        for p in unit.params:
            # the TP/EP-local tensor as FSDP2 sees it: member m's allocated piece at row
            # m x padded rows, its real boxes (from the checkpoint) a prefix, the rest zero
            want = np.zeros(p.unsharded_shape, ref.get(p.name).dtype)
            d = max(p.shard_dim, 0)
            for m, r in enumerate(unit.ranks):
                for shape, goff, _, loff in metas[r]["meta"][p.name]["boxes"]:
                    at = list(loff)
                    at[d] += m * p.padded_shape[d] if p.shard_dim >= 0 else 0
                    box(want, at, shape)[...] = box(ref.get(p.name), goff, shape)
            first = metas[unit.ranks[0]]["meta"][p.name]
            if not me.params[p.name].packed and numel(p.unsharded_shape) == sum(
                    numel(b[0]) for r in unit.ranks for b in metas[r]["meta"][p.name]["boxes"]):
                # no pad rows, not packed: the TP/EP-local tensor is one box of the global
                # tensor starting at FSDP member 0's offset (independent of the others')
                want = box(ref.get(p.name), first["global_offset"], p.unsharded_shape)
            if not same(got[p.name], want):
                fail(f"{label}: fsdp2 unit {unit.name!r}: {p.name} unsharded differs from the "
                     f"TP/EP-local tensor")


def check_muon(out, me, loaded, groups, ref, label):
    owners = []
    for g in me.muon:
        full = allgather_group(groups, g, me, loaded.arrays)
        for name in g.params:
            if not same(full[name], ref.get(name)):
                fail(f"{label}: muon group {g.key!r}: {name} gathered != global tensor")
            back = slice_back(g, name, full[name])
            if not same(back, np.ascontiguousarray(loaded.local(name))):
                fail(f"{label}: muon {name}: slice_back != this rank's shard")
            mesh = {a["name"]: a["size"] for a in out.plan["meshes"][g.mesh]}
            grid = int(np.prod([mesh[a] for a in g.replicate_axes])) if g.replicate_axes else 1
            owners.append((name, g.is_owner(name), grid))
    return owners


def check_flat(me, loaded, groups, label):
    """ZeRO-1/2 flat buffers: the shards all-gathered over each DP group rebuild the
    buffer this rank builds from its own tensors (DP replicas hold the same data), and
    every owned range holds its param's elements."""
    for fb in me.flat:
        if fb.zero_stage == 3:
            continue  # the buffer holds unsharded tensors: test_flat.py rebuilds them
        arrays = {pc.name: np.ascontiguousarray(loaded.local(pc.name)) for pc in fb.pieces}
        got = allgather_flat(groups, fb, arrays)
        want = flat_buffer(fb, arrays)
        if got.tobytes() != want.tobytes():
            fail(f"{label}: flat buffer (chunk {fb.model_chunk}, {fb.param_dtype}, expert "
                 f"{fb.expert}): the all-gathered shards differ from the buffer")
        for name, off, n, start in owned_ranges(fb):
            elem = want.view(np.uint8).reshape(-1)
            size = dtypes_size(fb.param_dtype)
            src = arrays[name].reshape(-1).view(np.uint8)[off * size:(off + n) * size]
            if elem[start * size:(start + n) * size].tobytes() != src.tobytes():
                fail(f"{label}: flat owned range of {name} at {start} is not its elements "
                     f"{off}..{off + n}")


def check_owners(all_owners, label):
    holders, owned, grid = {}, {}, {}
    for lst in all_owners:
        for name, is_owner, g in lst:
            holders[name] = holders.get(name, 0) + 1
            owned[name] = owned.get(name, 0) + int(is_owner)
            grid[name] = g
    for name in holders:
        if owned[name] * grid[name] != holders[name]:
            fail(f"{label}: muon {name}: {owned[name]} owners for {holders[name]} holders on a "
                 f"replicate grid of {grid[name]}")


def check_dcp(out, metas, label):
    md, writers = checkpoint_metadata(out), chunk_writers(out)
    for p in out.plan["params"]:
        if p.get("alias_of"):
            continue
        cover = np.zeros(p["global_shape"], np.int32)
        for c in md.state_dict_metadata[p["name"]].chunks:
            offsets, sizes = tuple(c.offsets), tuple(c.sizes)
            box(cover, offsets, sizes)[...] += 1
            holders = [r for r, m in enumerate(metas) if p["name"] in m["meta"] and
                       (sizes, offsets) in [(tuple(b[0]), tuple(b[1]))
                                            for b in m["meta"][p["name"]]["boxes"]]]
            writer = writers[(p["name"], offsets)]
            if not holders or writer != min(holders):
                fail(f"{label}: dcp {p['name']} chunk {list(offsets)}: writer {writer}, "
                     f"holders {holders}")
        if cover.size and not (cover == 1).all():
            fail(f"{label}: dcp {p['name']}: chunks do not tile the tensor exactly once")


def run_plan(task, rank, world, groups):
    label = task["name"]
    out = OutDir(task["outdir"])
    me = out.rank(rank) if rank < out.world_size else None
    loaded = None
    if me is not None:
        loaded = load_rank(me, task["ckpt"])
        want = sum(p.nbytes for p in me.storage_params())
        if loaded.bytes_read != want:
            fail(f"{label}: rank {rank} read {loaded.bytes_read} checkpoint bytes, holds {want}")
    ref = Reference(out, task["ckpt"])
    metas, blobs = gather_shards(me, loaded, rank, world)
    if rank == 0:
        check_rebuild(out, ref, metas, blobs, label)
        check_dcp(out, metas, label)
    groups.ensure(([st.ranks for g in me.muon for st in g.stages] +
                   [u.ranks for u in me.fsdp2] + [fb.ranks for fb in me.flat]) if me else [])
    owners = []
    if me is not None:
        check_fsdp2(out, me, loaded, groups, ref, metas, label)
        owners = check_muon(out, me, loaded, groups, ref, label)
        check_flat(me, loaded, groups, label)
    all_owners = [None] * world
    dist.all_gather_object(all_owners, owners)
    if rank == 0:
        check_owners(all_owners, label)


def run_reshard(task, rank, world):
    label = task["name"]
    a = OutDir(task["a"])
    b = OutDir(task["b"])
    listing = json.load(open(task["listing"]))
    source, dest = {}, {}
    if rank < a.world_size:
        loaded = load_rank(a.rank(rank), task["ckpt"])
        source = {n: loaded.local(n) for n in loaded.arrays}
    if rank < b.world_size:
        dest = b.rank(rank).params
    arrays, stats = reshard(listing, rank, source, dest)
    ref = Reference(b, task["ckpt"])
    mine = next((r for r in listing["ranks"] if r["rank"] == rank), None)
    if mine is not None:
        if stats["received_bytes"] != mine["moved_bytes"]:
            fail(f"{label}: rank {rank} received {stats['received_bytes']} bytes, listing moves "
                 f"{mine['moved_bytes']}")
        if stats["local_bytes"] != mine["in_place_bytes"]:
            fail(f"{label}: rank {rank} copied {stats['local_bytes']} in place, listing says "
                 f"{mine['in_place_bytes']}")
    if not stats["coverage_ok"]:
        fail(f"{label}: rank {rank}: some element written zero or several times")
    for name, info in dest.items():
        got = arrays[name]
        local = box(got, [0] * got.ndim, info.local_shape)
        # Every box of the local tensor (several for a packed param) equals the checkpoint's.
        for b in info.boxes:
            if not same(box(got, b.local_offset, b.shape), box(ref.get(name), b.global_offset,
                                                                 b.shape)):
                fail(f"{label}: rank {rank}: {name} box {list(b.global_offset)} after reshard "
                     "differs from the checkpoint")
        if got.size != local.size and np.count_nonzero(got.view(np.uint8)) != np.count_nonzero(local.view(np.uint8)):
            fail(f"{label}: rank {rank}: {name} padding not zero")
    sent = [None] * world
    dist.all_gather_object(sent, stats["sent_bytes"])
    if rank == 0 and sum(sent) != listing["totals"]["moved_bytes"]:
        fail(f"{label}: {sum(sent)} bytes sent in all, listing moves {listing['totals']['moved_bytes']}")


def expressible(out, me, meshes, world):
    """Names of the params every holder can make a DTensor of; the others,
    with the reason, agreed on by all ranks (so no rank starts a collective
    the others skip)."""
    from shardc_runtime.torch import check_layout, param_mesh

    bad = {}
    if me is not None:
        for name, info in me.params.items():
            if info.alias_of is not None:
                continue
            try:
                mesh, places = param_mesh(out, meshes, out.params[name])
                check_layout(info, me.rank, mesh, places)
            except PlanError as ex:
                bad[name] = str(ex)
    everyone = [None] * world
    dist.all_gather_object(everyone, bad)
    refused = {}
    for lst in everyone:  # the lowest rank's reason
        for name, why in lst.items():
            refused.setdefault(name, why)
    return refused


def run_dtensor(task, rank, world):
    """The adapter's DTensors: placements as the plan says, every local shard read from
    the checkpoint by slices (only this rank's bytes), full_tensor() equal to the
    checkpoint bit for bit."""
    from shardc_runtime.torch import device_meshes, dtensor, placement, to_storage

    label = task["name"]
    out = OutDir(task["outdir"])
    me = out.rank(rank) if rank < out.world_size else None
    meshes = device_meshes(out, me)
    refused = expressible(out, me, meshes, world)
    if rank == 0:
        for name, why in sorted(refused.items()):
            print(f"NOT A DTENSOR {label}: {why}", flush=True)
        if sorted(refused) != sorted(task.get("not_dtensor", [])):
            fail(f"{label}: params DTensor cannot express {sorted(refused)}, expected "
                 f"{sorted(task.get('not_dtensor', []))}")
    if me is None:
        return
    ref = Reference(out, task["ckpt"])
    ck = Checkpoint(task["ckpt"])
    made = 0
    for name, info in me.params.items():
        if info.alias_of is not None or name in refused:
            continue
        made += 1
        before = ck.bytes_read
        dt = dtensor(out, me, meshes, name, ck)
        if ck.bytes_read - before != info.nbytes:
            fail(f"{label}: {name}: read {ck.bytes_read - before} bytes, holds {info.nbytes}")
        spec = out.params[name]
        pp = (out.plan.get("pipeline") or {}).get("axis")
        want = [placement(lbl) for lbl, axis in zip(spec["placements"], out.plan["meshes"][spec["mesh"]])
                if axis["name"] != pp]
        if list(dt.placements) != want:
            fail(f"{label}: {name}: placements {dt.placements} != plan {spec['placements']}")
        if tuple(dt.to_local().shape) != info.local_shape:
            fail(f"{label}: {name}: local shape {tuple(dt.to_local().shape)} != {info.local_shape}")
        full = to_storage(dt.full_tensor())
        if not same(full, ref.get(name)):
            fail(f"{label}: {name}: full_tensor() differs from the checkpoint on rank {rank}")
    if made == 0:
        fail(f"{label}: rank {rank} made no DTensor")
    print(f"rank {rank}: {label}: {made} DTensors, full_tensor() == checkpoint", flush=True)


def run_dcp(task, rank, world):
    """dcp.save of plan A's DTensors, dcp.load into plan B's: the saved Metadata's chunks
    are checkpoint_metadata(A)'s, every plan-B shard equals the checkpoint, and the boxes
    (and bytes) DCP reads on each rank are the ones `shardc reshard A B` lists."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
    from shardc_runtime.torch import checkpoint_metadata, device_meshes, dtensor, to_storage

    label = task["name"]
    a, b = OutDir(task["a"]), OutDir(task["b"])
    me_a = a.rank(rank) if rank < a.world_size else None
    me_b = b.rank(rank) if rank < b.world_size else None
    # plan B may have fewer ranks than the launch (tied_pp, tp_uneven: 6 of 8): the others
    # hold nothing and only take part in dcp.load's collectives
    meshes_a = device_meshes(a, me_a, allow_spare_ranks=True)
    meshes_b = device_meshes(b, me_b, allow_spare_ranks=True)
    why = dict(expressible(a, me_a, meshes_a, world), **expressible(b, me_b, meshes_b, world))
    refused = set(why)
    if rank == 0:
        for name in sorted(why):
            print(f"NOT A DTENSOR {label}: {why[name]}", flush=True)
    if rank == 0 and sorted(refused) != sorted(task.get("not_dtensor", [])):
        fail(f"{label}: params DTensor cannot express {sorted(refused)}, expected "
             f"{sorted(task.get('not_dtensor', []))}")
    ck = Checkpoint(task["ckpt"])
    saved = {}
    for name, info in (me_a.params.items() if me_a else []):
        if info.alias_of is None and name not in refused:
            saved[name] = dtensor(a, me_a, meshes_a, name, ck)
    dcp.save(saved, checkpoint_id=task["dcp_dir"])
    if rank == 0:
        md = FileSystemReader(task["dcp_dir"]).read_metadata().state_dict_metadata
        planned = checkpoint_metadata(a).state_dict_metadata
        for fqn, m in planned.items():
            if fqn in refused:
                continue
            got = sorted((tuple(c.offsets), tuple(c.sizes)) for c in md[fqn].chunks
                         if numel(c.sizes) > 0)
            want = sorted((tuple(c.offsets), tuple(c.sizes)) for c in m.chunks)
            if got != want or tuple(md[fqn].size) != tuple(m.size) or \
                    md[fqn].properties.dtype != m.properties.dtype:
                fail(f"{label}: dcp.save chunks of {fqn} {got} != checkpoint_metadata {want}")
    reads = []

    class Recording(DefaultLoadPlanner):
        def create_local_plan(self):
            plan = super().create_local_plan()
            reads.extend(plan.items)
            return plan

    loading = {}
    for name, info in (me_b.params.items() if me_b else []):
        if info.alias_of is None and name not in refused:
            loading[name] = dtensor(b, me_b, meshes_b, name, None)
    dcp.load(loading, checkpoint_id=task["dcp_dir"], planner=Recording())
    ref = Reference(b, task["ckpt"])
    for name, dt in loading.items():
        info = me_b.params[name]
        local = to_storage(dt.to_local())
        if info.numel and not same(local, box(ref.get(name), info.global_offset, info.local_shape)):
            fail(f"{label}: rank {rank}: {name} after dcp.load differs from the checkpoint")
    got = sorted((r.storage_index.fqn,
                  tuple(int(o) + int(s) for o, s in zip(r.storage_index.offset, r.storage_offsets)),
                  tuple(int(x) for x in r.lengths)) for r in reads if numel(r.lengths) > 0)
    listing = json.load(open(task["listing"]))
    mine = next((r for r in listing["ranks"] if r["rank"] == rank), None)
    want = []
    for p in (mine["params"] if mine else []):
        if p["name"] in refused:
            continue
        for rd in p["reads"]:
            want.append((p["name"], tuple(o + d for o, d in zip(p["global_offset"], rd["dst_offset"])),
                         tuple(rd["shape"])))
    if sorted(want) != got:
        fail(f"{label}: rank {rank}: DCP reads {len(got)} boxes, the listing {len(want)}: "
             f"{[x for x in got if x not in want][:3]} vs {[x for x in want if x not in got][:3]}")
    es = {p["name"]: np.dtype(dtypes_storage(p["dtype"])).itemsize for p in b.plan["params"]}
    got_bytes = sum(numel(x[2]) * es[x[0]] for x in got)
    want_bytes = sum(rd["bytes"] for p in (mine["params"] if mine else []) if p["name"] not in refused
                     for rd in p["reads"])
    if got_bytes != want_bytes:
        fail(f"{label}: rank {rank}: DCP reads {got_bytes} bytes, the listing {want_bytes}")
    elif rank == 0:
        print(f"{label}: rank 0 reads {got_bytes} bytes in {len(got)} boxes, as listed", flush=True)


def dtypes_storage(name):
    from shardc_runtime import dtypes
    return dtypes.storage_dtype(name)


def entry(argv, log_path, limit):
    """A worker forked from harness's fork server (torch already imported): its own
    session, stdout and stderr to `log_path`, the watchdog, then main(argv)."""
    global T0
    T0 = time.monotonic()
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    watchdog(limit)
    main(argv)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--spec", required=True)
    args = ap.parse_args(argv)
    spec = json.load(open(args.spec))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank,
                            world_size=args.world,
                            timeout=datetime.timedelta(seconds=spec.get("collective_timeout", 90)))
    groups = Groups()
    start = time.monotonic()
    print(f"rank {args.rank}: joined in {start - T0:.1f} s", flush=True)
    for task in spec["tasks"]:
        n = len(FAILURES)
        if task["kind"] == "plan":
            run_plan(task, args.rank, args.world, groups)
        elif task["kind"] == "dtensor":
            run_dtensor(task, args.rank, args.world)
        elif task["kind"] == "dcp":
            run_dcp(task, args.rank, args.world)
        elif task["kind"] == "fsdp":
            import fsdp_check
            FAILURES.extend(fsdp_check.run(task, args.rank, args.world, fail))
        elif task["kind"] == "hf":
            import hf_forward
            FAILURES.extend(hf_forward.run(task, args.rank, args.world, fail))
        elif task["kind"] == "train":
            import train
            FAILURES.extend(train.run(task, args.rank, args.world, fail))
        elif task["kind"] == "misuse":
            import misuse
            FAILURES.extend(misuse.run(task, args.rank, args.world, fail))
        elif task["kind"] == "comm":
            import comm_witness
            FAILURES.extend(comm_witness.run(task, args.rank, args.world, fail))
        else:
            run_reshard(task, args.rank, args.world)
        if task.get("expect_mismatch"):  # a broken input: some rank must catch it
            caught = [None] * args.world
            dist.all_gather_object(caught, len(FAILURES) - n)
            del FAILURES[n:]
            if sum(caught) == 0:
                fail(f"{task['name']}: the broken input was not caught by any rank")
            elif args.rank == 0:
                print(f"EXPECTED: {task['name']}: caught by {sum(c > 0 for c in caught)} rank(s)")
        print(f"rank {args.rank}: {task['kind']} {task['name']}: "
              f"{'ok' if len(FAILURES) == n else 'FAILED'} ({time.monotonic() - start:.1f} s)",
              flush=True)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {args.rank}: done at {time.monotonic() - T0:.1f} s", flush=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
