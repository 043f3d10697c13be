#!/usr/bin/env python3
"""Single-process tests of the runtime adapter (tools/python/shardc_runtime).

    test_adapter.py --shardc BIN

No process group: the all-gathers are simulated by packing every rank's slot
in memory, so the pure pack/unpack functions are checked on every rank of the
feature plans; box reads are checked to read exactly the box's bytes; DCP
metadata, rank lists, local_tensors and the manifest refusal are checked too.
The multi-process proof is run_runtime.py.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from findpy import find_torch_python

FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL " + msg)


def test_safetensors(work):
    rng = np.random.default_rng(1)
    a = harness.random_values("bfloat16", [7, 5, 3], rng)
    b = harness.random_values("float32", [4], rng)
    path = os.path.join(work, "t.safetensors")
    st.write_file(path, {"a": (a, "bfloat16"), "b": (b, "float32")})
    ck = st.Checkpoint(path)
    for off, shape in [([0, 0, 0], [7, 5, 3]), ([2, 0, 0], [3, 5, 3]), ([1, 2, 0], [4, 2, 3]),
                       ([0, 1, 1], [7, 3, 1]), ([6, 4, 2], [1, 1, 1]), ([7, 0, 0], [0, 5, 3])]:
        before = ck.bytes_read
        got = ck.read_box("a", off, shape)
        want = a[off[0]:off[0] + shape[0], off[1]:off[1] + shape[1], off[2]:off[2] + shape[2]]
        check(got.tobytes() == want.tobytes(), f"read_box {off} {shape}")
        check(ck.bytes_read - before == want.nbytes, f"read_box {off} {shape} read "
              f"{ck.bytes_read - before} bytes, box has {want.nbytes}")
    runs = list(st._runs([7, 5, 3], [2, 0, 0], [3, 5, 3]))
    check(runs == [(30, 45)], f"a row box is one run: {runs}")
    try:
        ck.read_box("a", [5, 0, 0], [3, 5, 3])
        check(False, "a box leaving the tensor must be refused")
    except ValueError:
        pass
    # a Hugging Face sharded checkpoint: two files and model.safetensors.index.json
    st.write_file(os.path.join(work, "m-1.safetensors"), {"a": (a, "bfloat16")})
    st.write_file(os.path.join(work, "m-2.safetensors"), {"b": (b, "float32")})
    index = os.path.join(work, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {}, "weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"}}, f)
    ck2 = st.Checkpoint(index)
    check(ck2.read_box("b", [1], [2]).tobytes() == b[1:3].tobytes(), "index.json checkpoint")
    check(rs.parse_rank_list("4-12:4,1,0-1") == [4, 8, 12, 1, 0, 1], "rank list order kept")
    check(rs.parse_rank_set("3-2043:8")[:3] == [3, 11, 19], "rank set step")


def simulate_fsdp2(out, ranks, loaded):
    """Every unit of every rank packed, 'all-gathered' in memory, unpacked."""
    n = 0
    for r in ranks:
        for unit in ranks[r].fsdp2:
            slots = np.stack([fsdp2.pack_unit(u, ranks[m], loaded[m].arrays)
                              for m in unit.ranks
                              for u in ranks[m].fsdp2 if (u.name, u.mesh) == (unit.name, unit.mesh)])
            got = fsdp2.unpack_unit(unit, ranks[r], slots)
            for p in unit.params:
                ref = loaded_ref(out, p.name)
                want = np.zeros(p.unsharded_shape, ref.dtype)  # pad rows stay zero
                d = max(p.shard_dim, 0)
                for m, k in enumerate(unit.ranks):
                    for b in ranks[k].params[p.name].boxes:
                        at = list(b.local_offset)
                        at[d] += m * p.padded_shape[d] if p.shard_dim >= 0 else 0
                        want[tuple(slice(o, o + s) for o, s in zip(at, b.shape))] = \
                            ref[tuple(slice(o, o + s) for o, s in zip(b.global_offset, b.shape))]
                check(got[p.name].tobytes() == np.ascontiguousarray(want).tobytes(),
                      f"fsdp2 {out.path} rank {r} {p.name}")
                n += 1
    return n


def simulate_muon(out, ranks, loaded):
    """Each rank's stages run on in-memory all-gathers of its stage groups'
    members (recursively: a member's input at stage s is its output of s-1)."""
    n = 0
    for r in ranks:
        for gi, g in enumerate(ranks[r].muon):
            muon.check_written(g, ranks[r])
            for bi, batch in enumerate(g.batches):
                memo = {}

                def state(m, s):
                    if (m, s) not in memo:
                        gm = ranks[m].muon[gi]
                        if s == 0:
                            memo[(m, s)] = {x: np.ascontiguousarray(loaded[m].local(x))
                                            for x in gm.batches[bi].params}
                        else:
                            slots = [muon.pack_stage(ranks[k].muon[gi], ranks[k].muon[gi].batches[bi],
                                                     s - 1, state(k, s - 1))
                                     for k in gm.stages[s - 1].ranks]
                            gathered = np.stack([sl[0] for sl in slots])
                            mine = slots[gm.stages[s - 1].index][1]
                            memo[(m, s)] = muon.unpack_stage(gm, gm.batches[bi], s - 1, gathered, mine)
                    return memo[(m, s)]

                final = state(r, len(g.stages))
                for name in batch.params:
                    full = final[name]
                    check(full.tobytes() == np.ascontiguousarray(loaded_ref(out, name)).tobytes(),
                          f"muon {out.path} rank {r} {name}")
                    back = muon.slice_back(g, name, full)
                    check(np.ascontiguousarray(back).tobytes() ==
                          np.ascontiguousarray(loaded[r].local(name)).tobytes(),
                          f"muon slice_back rank {r} {name}")
                    n += 1
    return n


def to_lean(doc):
    """The lean rank-file form (README "Rank files: derived fields") of a full
    one: params by index, rank lists as strings, run-length split sizes,
    derived fields dropped. Lets the lean reader be checked against the full
    one on the same plan."""
    idx = {p["name"]: i for i, p in enumerate(doc["params"])}

    def runs(v):
        out = []
        for x in v:
            if out and out[-1][0] == x:
                out[-1][1] += 1
            else:
                out.append([x, 1])
        return out

    lean = dict(doc, buffers=[])
    for b in doc["buffers"]:
        nb = {"kind": b["kind"]}
        if b["kind"] == "muon_allgather":
            nb.update(alignment_bytes=b["alignment_bytes"], max_batch_numel=b["max_batch_numel"],
                      groups=[])
            for g in b["groups"]:
                st0 = g["batches"][0]["stages"] if g["batches"] else []
                splits = {n: [] for n in g["params"]}
                for bt in g["batches"]:
                    for st_ in bt["stages"]:
                        for sp in st_["params"]:
                            splits[sp["name"]].append(runs(sp["split_sizes"]))
                nb["groups"].append({
                    "key": g["key"], "mesh": g["mesh"], "replicate_axes": g["replicate_axes"],
                    "replicate_coord": g["replicate_coord"],
                    "stages": [{"axes": x["axes"], "tensor_dim": x["params"][0]["tensor_dim"],
                                "ranks": ",".join(map(str, x["ranks"])), "index": x["index"]}
                               for x in st0],
                    "params": [{"param": idx[o["param"]], "owner": o["owner"],
                                "split_sizes": splits[o["param"]]} for o in g["owners"]],
                    "batches": [{"dtype": bt["dtype"],
                                 "params": [idx[sp["name"]] for sp in bt["stages"][0]["params"]]
                                 if bt["stages"] else [idx[n] for n in g["params"]],
                                 "total_numel": [x["total_numel"] for x in bt["stages"]]}
                                for bt in g["batches"]]})
        else:
            nb["units"] = [dict({k: u[k] for k in ("name", "mesh", "units", "index", "total",
                                                   "total_bytes", "output_shape")},
                                ranks=",".join(map(str, u["ranks"])),
                                params=[{"param": idx[p["name"]], "shard_dim": p["shard_dim"],
                                         "offset": p["offset"], "padded_numel": p["padded_numel"],
                                         "unsharded_shape": p["unsharded_shape"]}
                                        for p in u["params"]]) for u in b["units"]]
        nb["not_communicated"] = [idx[n] for n in b["not_communicated"]]
        lean["buffers"].append(nb)
    return lean


def same_layouts(a, b):
    """Normalized muon groups and FSDP2 units of two RankFiles are equal."""
    def muon_key(g):
        return (g.key, g.mesh, g.replicate_coord,
                [(s.axes, s.tensor_dim, s.ranks, s.index) for s in g.stages],
                g.params, g.split_sizes, g.owner,
                [(x.dtype, x.params, x.total_numel) for x in g.batches if x.total_numel])

    def unit_key(u):
        return (u.name, u.mesh, u.units, u.ranks, u.index, u.total, u.total_bytes,
                [vars(p) for p in u.params])
    return ([muon_key(g) for g in a.muon] == [muon_key(g) for g in b.muon] and
            [unit_key(u) for u in a.fsdp2] == [unit_key(u) for u in b.fsdp2])


REFS = {}


def loaded_ref(out, name):
    return REFS[(out.path, name)]


def test_plan(shardc, work, case):
    outdir = harness.compile_plan(shardc, os.path.join(harness.HERE, "cases", case, "model.yaml"),
                                  os.path.join(harness.HERE, "cases", case, "recipe.yaml"),
                                  os.path.join(work, case))
    ckpt = os.path.join(work, case + ".safetensors")
    harness.write_checkpoint(outdir, ckpt, seed=3)
    out = sr.OutDir(outdir, require_manifest=os.path.exists(os.path.join(outdir, "manifest.json")))
    ck = sr.Checkpoint(ckpt)
    for p in out.plan["params"]:
        sf, ties = p.get("stacked_from"), {t["alias"]: t["source"] for t in out.plan["tie_sync_groups"]}
        src = p.get("alias_of") or ties.get(p["name"])
        if p["name"] in ck:
            REFS[(out.path, p["name"])] = ck.read_full(p["name"])
        elif sf:
            REFS[(out.path, p["name"])] = np.stack([ck.read_full(s) for s in sf["sources"]])
        else:
            REFS[(out.path, p["name"])] = ck.read_full(src)
    ranks = {r: out.rank(r) for r in range(out.world_size)}
    for r, rf in ranks.items():
        if any("groups" in b and b["groups"] and "owners" in b["groups"][0] for b in rf.doc["buffers"]) \
                or any("units" in b and b["units"] and "name" in b["units"][0]["params"][0]
                       for b in rf.doc["buffers"] if b.get("units") and b["units"][0]["params"]):
            lean = sr.RankFile(to_lean(rf.doc), out.plan)
            check(same_layouts(rf, lean), f"{case} rank {r}: lean and full forms read differently")
    loaded = {}
    for r, rf in ranks.items():
        loaded[r] = sr.load_rank(rf, ckpt)
        want = sum(p.nbytes for p in rf.storage_params())
        check(loaded[r].bytes_read == want, f"{case} rank {r}: read {loaded[r].bytes_read} bytes, "
              f"holds {want}")
        for p in rf.params.values():
            a = loaded[r].padded(p.name)
            check(list(a.shape) == p.padded_shape, f"{case} {p.name} padded shape")
            local = loaded[r].local(p.name)
            check(np.count_nonzero(a.view(np.uint8)) == np.count_nonzero(
                np.ascontiguousarray(local).view(np.uint8)), f"{case} {p.name}: padding not zero")
            ref = loaded_ref(out, p.name)
            for b in p.boxes:  # one box, or a packed param's several
                want_box = ref[tuple(slice(o, o + s) for o, s in zip(b.global_offset, b.shape))]
                got_box = local[tuple(slice(o, o + s) for o, s in zip(b.local_offset, b.shape))]
                check(np.ascontiguousarray(got_box).tobytes() == np.ascontiguousarray(want_box).tobytes(),
                      f"{case} rank {r} {p.name}: loaded shard differs")
            if p.alias_of:
                check(a is loaded[r].padded(p.alias_of), f"{case} alias {p.name} shares storage")
    nf, nm = simulate_fsdp2(out, ranks, loaded), simulate_muon(out, ranks, loaded)
    md = sr.checkpoint_metadata(out)
    for fqn, m in md["state_dict_metadata"].items():
        total = sum(int(np.prod(c["sizes"])) for c in m["chunks"])
        check(total == int(np.prod(m["size"])), f"{case} dcp {fqn}: chunks cover {total} elements")
    ts = sr.local_tensors(ranks[0])
    for name, t in ts.items():
        p = ranks[0].params[name]
        check(list(t.shape) == p.padded_shape and str(t.dtype) == f"torch.{p.dtype}",
              f"local_tensors {name}: {t.dtype} {list(t.shape)}")
        if p.alias_of:
            check(t is ts[p.alias_of], f"local_tensors alias {name}")
    ts = sr.local_tensors(ranks[0], ckpt, requires_grad=True, aliases=False)
    for name, p in ranks[0].params.items():
        if p.alias_of:
            check(name not in ts, f"local_tensors(aliases=False) leaves out {name}")
            continue
        t = ts[name]
        check(t.requires_grad == (p.requires_grad and t.is_floating_point()),
              f"local_tensors requires_grad {name}")
        check(t.detach().numpy().tobytes() == np.ascontiguousarray(loaded[0].padded(name)).tobytes()
              if str(t.dtype) != "torch.bfloat16" else
              t.detach().view(torch.int16).numpy().tobytes() == loaded[0].padded(name).tobytes(),
              f"local_tensors values {name}")
    print(f"{case}: {out.world_size} ranks, {nf} fsdp2 and {nm} muon param checks")
    return outdir


def test_manifest(outdir, work):
    if os.path.exists(os.path.join(outdir, "manifest.json")):
        changed = os.path.join(work, "changed")
        shutil.copytree(outdir, changed)
        out = sr.OutDir(changed, require_manifest=True)
        path = os.path.join(changed, out.rank_path(1))
        with open(path, "a") as f:
            f.write(" ")
        try:
            out.rank(1)
            check(False, "a rank file changed after the compile must be refused")
        except sr.PlanError as e:
            check("changed after the compile" in str(e), f"refusal message: {e}")
        out.rank(0)  # the unchanged files still read
    bare = os.path.join(work, "no-manifest")
    shutil.copytree(outdir, bare)
    if os.path.exists(os.path.join(bare, "manifest.json")):
        os.remove(os.path.join(bare, "manifest.json"))
    try:
        sr.OutDir(bare)  # the default refuses it
        check(False, "a directory without manifest.json must be refused")
    except sr.PlanError as e:
        check("incomplete compile" in str(e), f"refusal message: {e}")
    sr.OutDir(bare, require_manifest=False).rank(0)  # an old shardc's output, on request


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    args = ap.parse_args()
    python = sys.executable if os.environ.get("SHARDC_RUNTIME_PYTHON_OK") else find_torch_python()
    if python is None:
        print("*" * 72 + "\nSKIPPED: no python3 with torch + numpy found\n" + "*" * 72)
        return 77
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        os.environ["SHARDC_RUNTIME_PYTHON_OK"] = "1"
        os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])
    global harness, np, sr, st, rs, fsdp2, muon, torch
    import harness
    import torch
    import numpy as np
    import shardc_runtime as sr
    from shardc_runtime import fsdp2, muon
    from shardc_runtime import rankset as rs
    from shardc_runtime import safetensors_io as st
    work = tempfile.mkdtemp(prefix="shardc-adapter-")
    try:
        test_safetensors(work)
        outdir = None
        for case in ["tp_uneven", "hsdp_tp", "ep_efsdp", "tied_pp"]:
            outdir = test_plan(os.path.abspath(args.shardc), work, case)
        test_manifest(outdir, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"runtime/adapter: {'FAIL (%d)' % len(FAILS) if FAILS else 'PASS'}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
