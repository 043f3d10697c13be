"""Single-process tests of the runtime adapter (tools/python/shardc_runtime).

No process group: the all-gathers are simulated by packing every rank's slot in
memory, so the pure pack/unpack functions are checked on every rank of the
feature plans; box reads are checked to read exactly the box's bytes; DCP
metadata, rank lists, local_tensors and the manifest refusals are checked too.
The multi-process proofs are test_distributed.py.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import harness
import numpy as np
import pytest
import torch
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

import shardc_runtime as sr
from shardc_runtime import fsdp2, muon
from shardc_runtime import rankset as rs
from shardc_runtime import safetensors_io as st
from shardc_runtime.layout import numel
from shardc_runtime.torch import checkpoint_metadata, local_tensors

CASES = ["tp_uneven", "hsdp_tp", "ep_efsdp", "tied_pp"]
Array = Any


def box(array: Array, offset: tuple[int, ...] | list[int], shape: tuple[int, ...] | list[int]) -> Array:
    return array[tuple(slice(o, o + s) for o, s in zip(offset, shape))]


def same(a: Array, b: Array) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and a.tobytes() == b.tobytes()


def test_safetensors_boxes(tmp_path: Any) -> None:
    rng = np.random.default_rng(1)
    a = harness.random_values("bfloat16", [7, 5, 3], rng)
    b = harness.random_values("float32", [4], rng)
    path = str(tmp_path / "t.safetensors")
    st.write_file(path, {"a": (a, "bfloat16"), "b": (b, "float32")})
    ck = st.Checkpoint(path)
    for off, shape in [([0, 0, 0], [7, 5, 3]), ([2, 0, 0], [3, 5, 3]), ([1, 2, 0], [4, 2, 3]),
                       ([0, 1, 1], [7, 3, 1]), ([6, 4, 2], [1, 1, 1]), ([7, 0, 0], [0, 5, 3])]:
        before = ck.bytes_read
        got = ck.read_box("a", off, shape)
        want = box(a, off, shape)
        assert same(got, want), f"read_box {off} {shape}"
        assert ck.bytes_read - before == want.nbytes, f"read_box {off} {shape}"
    with pytest.raises(sr.CheckpointError, match="outside"):
        ck.read_box("a", [5, 0, 0], [3, 5, 3])
    with pytest.raises(sr.CheckpointError, match="'nope'.*not in the checkpoint"):
        ck.entry("nope")
    # a Hugging Face sharded checkpoint: two files and model.safetensors.index.json
    st.write_file(str(tmp_path / "m-1.safetensors"), {"a": (a, "bfloat16")})
    st.write_file(str(tmp_path / "m-2.safetensors"), {"b": (b, "float32")})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {"a": "m-1.safetensors",
                                                                "b": "m-2.safetensors"}}))
    assert same(st.Checkpoint(str(index)).read_box("b", [1], [2]), b[1:3])


def test_rank_lists() -> None:
    assert list(rs.parse_rank_list("4-12:4,1,0-1", 16)) == [4, 8, 12, 1, 0, 1]
    assert list(rs.parse_rank_set("3-2043:8", 2048))[:3] == [3, 11, 19]
    big = rs.parse_rank_list("0-16777215", 1 << 24)  # 2^24 ranks: held as one progression
    assert len(big) == 1 << 24 and big[-1] == (1 << 24) - 1 and big.position(12345) == 12345
    assert rs.parse_rank_set("5,0-3", 8).first == 0


def references(out: sr.OutDir, ckpt: str) -> dict[str, Array]:
    """Every global tensor from the checkpoint, resolving stacked experts and
    ties from plan.json independently of the adapter's load path."""
    ck = sr.Checkpoint(ckpt)
    ties = {t["alias"]: t["source"] for t in out.plan["tie_sync_groups"]}
    refs = {}
    for p in out.plan["params"]:
        sf, src = p.get("stacked_from"), p.get("alias_of") or ties.get(p["name"])
        if p["name"] in ck:
            refs[p["name"]] = ck.read_full(p["name"])
        elif sf:
            refs[p["name"]] = np.stack([ck.read_full(s) for s in sf["sources"]])
        else:
            assert src is not None, f"{p['name']}: not in the checkpoint, no tie source"
            refs[p["name"]] = ck.read_full(src)
    return refs


@pytest.fixture(scope="module")
def compiled(shardc: str, tmp_path_factory: Any) -> dict[str, tuple[str, str]]:
    work = tmp_path_factory.mktemp("adapter")
    out = {}
    for case in CASES:
        outdir = harness.compile_plan(shardc, os.path.join(harness.HERE, "cases", case, "model.yaml"),
                                      os.path.join(harness.HERE, "cases", case, "recipe.yaml"),
                                      str(work / case))
        ckpt = str(work / f"{case}.safetensors")
        harness.write_checkpoint(outdir, ckpt, seed=3)
        out[case] = (outdir, ckpt)
    return out


def simulate_fsdp2(ranks: dict[int, sr.RankFile], loaded: dict[int, sr.LoadedRank],
                   refs: dict[str, Array]) -> int:
    """Every unit of every rank packed, 'all-gathered' in memory, unpacked."""
    checked = 0
    for r in ranks:
        for unit in ranks[r].fsdp2:
            slots = np.stack([fsdp2.pack_unit(u, ranks[m], loaded[m].arrays)
                              for m in unit.ranks
                              for u in ranks[m].fsdp2 if (u.name, u.mesh) == (unit.name, unit.mesh)])
            got = fsdp2.unpack_unit(unit, ranks[r], slots)
            for p in unit.params:
                ref = refs[p.name]
                want = np.zeros(p.unsharded_shape, ref.dtype)  # pad rows stay zero
                dim = max(p.shard_dim, 0)
                for m, k in enumerate(unit.ranks):
                    for b in ranks[k].params[p.name].boxes:
                        at = list(b.local_offset)
                        at[dim] += m * p.padded_shape[dim] if p.shard_dim >= 0 else 0
                        box(want, at, b.shape)[...] = box(ref, b.global_offset, b.shape)
                assert same(got[p.name], want), f"fsdp2 rank {r} {p.name}"
                checked += 1
    return checked


def simulate_muon(ranks: dict[int, sr.RankFile], loaded: dict[int, sr.LoadedRank],
                  refs: dict[str, Array]) -> int:
    """Each rank's stages run on in-memory all-gathers of its stage groups'
    members (recursively: a member's input at stage s is its output of s-1)."""
    checked = 0
    for r in ranks:
        for gi, g in enumerate(ranks[r].muon):
            for bi, batch in enumerate(g.batches):
                memo: dict[tuple[int, int], dict[str, Array]] = {}

                def state(member: int, stage: int) -> dict[str, Array]:
                    if (member, stage) not in memo:
                        gm = ranks[member].muon[gi]
                        if stage == 0:
                            memo[(member, stage)] = {
                                x: np.ascontiguousarray(loaded[member].local(x))
                                for x in gm.batches[bi].params}
                        else:
                            slots = [muon.pack_stage(ranks[k].muon[gi], ranks[k].muon[gi].batches[bi],
                                                     stage - 1, state(k, stage - 1))
                                     for k in gm.stages[stage - 1].ranks]
                            gathered = np.stack([sl[0] for sl in slots])
                            mine = slots[gm.stages[stage - 1].index][1]
                            memo[(member, stage)] = muon.unpack_stage(gm, gm.batches[bi], stage - 1,
                                                                      gathered, mine)
                    return memo[(member, stage)]

                final = state(r, len(g.stages))
                for name in batch.params:
                    assert same(final[name], refs[name]), f"muon rank {r} {name}"
                    back = muon.slice_back(g, name, final[name])
                    assert same(back, loaded[r].local(name)), f"muon slice_back rank {r} {name}"
                    checked += 1
    return checked


@pytest.mark.parametrize("case", CASES)
def test_plan(compiled: dict[str, tuple[str, str]], case: str) -> None:
    outdir, ckpt = compiled[case]
    out = sr.OutDir(outdir)
    refs = references(out, ckpt)
    ranks = {r: out.rank(r) for r in range(out.world_size)}
    loaded = {}
    for r, rf in ranks.items():
        loaded[r] = sr.load_rank(rf, ckpt)
        want = sum(p.nbytes for p in rf.storage_params())
        assert loaded[r].bytes_read == want, f"rank {r}: read {loaded[r].bytes_read} bytes"
        for p in rf.params.values():
            a = loaded[r].padded(p.name)
            assert a.shape == p.padded_shape, f"{p.name} padded shape"
            local = loaded[r].local(p.name)
            assert np.count_nonzero(a.view(np.uint8)) == np.count_nonzero(
                np.ascontiguousarray(local).view(np.uint8)), f"{p.name}: padding not zero"
            for b in p.boxes:  # one box, or a packed param's several
                assert same(box(local, b.local_offset, b.shape),
                            box(refs[p.name], b.global_offset, b.shape)), f"rank {r} {p.name}"
            if p.alias_of:
                assert a is loaded[r].padded(p.alias_of), f"alias {p.name} shares storage"
    checked = simulate_fsdp2(ranks, loaded, refs) + simulate_muon(ranks, loaded, refs)
    assert checked > 0, "no FSDP2 or muon layout was checked"
    md = checkpoint_metadata(out)
    for fqn, m in md.state_dict_metadata.items():
        assert isinstance(m, TensorStorageMetadata), fqn
        cover = np.zeros(tuple(m.size), np.int32)
        for c in m.chunks:
            box(cover, c.offsets, c.sizes)[...] += 1
        assert cover.size == 0 or (cover == 1).all(), f"dcp {fqn}: chunks do not tile once"
    ts = local_tensors(ranks[0])
    for name, t in ts.items():
        p = ranks[0].params[name]
        assert tuple(t.shape) == p.padded_shape and str(t.dtype) == f"torch.{p.dtype}", name
        if p.alias_of:
            assert t is ts[p.alias_of], f"local_tensors alias {name}"
    ts = local_tensors(ranks[0], ckpt, requires_grad=True, aliases=False)
    for name, p in ranks[0].params.items():
        if p.alias_of:
            assert name not in ts, f"local_tensors(aliases=False) leaves out {name}"
            continue
        t = ts[name]
        assert t.requires_grad == (p.requires_grad and t.is_floating_point()), name
        assert t.detach().reshape(-1).view(torch.uint8).numpy().tobytes() == \
            np.ascontiguousarray(loaded[0].padded(name)).tobytes(), f"local_tensors values {name}"


def resign(outdir: str, rel: str) -> None:
    """Make manifest.json list rel's current size and sha256 (only the
    meaning of the file is then wrong)."""
    import hashlib

    mpath = os.path.join(outdir, "manifest.json")
    m = json.load(open(mpath))
    data = open(os.path.join(outdir, rel), "rb").read()
    entry = m["plan"] if rel == "plan.json" else next(
        f for f in m["rank_files"]["files"] if f["path"] == rel)
    entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    with open(mpath, "w") as f:
        json.dump(m, f)


def test_manifest_refusals(compiled: dict[str, tuple[str, str]], tmp_path: Any) -> None:
    outdir, _ = compiled["tied_pp"]
    changed = str(tmp_path / "changed")
    shutil.copytree(outdir, changed)
    out = sr.OutDir(changed)
    with open(os.path.join(changed, out.rank_path(1)), "a") as f:
        f.write(" ")
    with pytest.raises(sr.PlanError, match="changed after the compile"):
        out.rank(1)
    out.rank(0)  # the unchanged files still read
    bare = str(tmp_path / "no-manifest")
    shutil.copytree(outdir, bare)
    os.remove(os.path.join(bare, "manifest.json"))
    with pytest.raises(sr.PlanError, match="incomplete compile"):
        sr.OutDir(bare)


def test_expert_ids(compiled: dict[str, tuple[str, str]], shardc: str, tmp_path: Any) -> None:
    """Each rank serves the experts of its EP coordinate, as its rank file's
    local_attributes state them (shardc's derivation, contract §6.7): the plan's
    W-EXPERTS ranges (6 experts over ep 4 chunk: 2, 2, 2, 0; expert FSDP on dim 0), and
    with expert FSDP on the expert dim (recipe_b: ep 2, efsdp 4 on dim 0, pieces 1, 1,
    1, 0) the whole EP-local range 3e..3e+3, not the rank's FSDP piece (no FSDP2 units
    needed: the rank file says it)."""
    out = sr.OutDir(compiled["ep_efsdp"][0])
    ranges = {d["param"]: d["expert_ranges"] for d in out.plan["diagnostics"]
              if d["code"] == "W-EXPERTS"}
    held = set()
    for rank in range(out.world_size):
        me = out.rank(rank)
        ids = sr.expert_ids(me)
        assert sorted(ids) == [f"model.layers.{i}.mlp.experts" for i in range(2)], ids
        first, last = ranges["model.layers.0.mlp.experts.w1"][me.coords["expert"]["ep"]]
        for name, got in ids.items():
            assert got == range(first, last), f"rank {rank} {name}: {got}"
            held |= set(got)
    assert held == set(range(6))
    case = os.path.join(harness.HERE, "cases", "ep_efsdp")
    out_b = sr.OutDir(harness.compile_plan(shardc, os.path.join(case, "model.yaml"),
                                           os.path.join(case, "recipe_b.yaml"), str(tmp_path / "b")))
    for rank in range(out_b.world_size):
        me = out_b.rank(rank)
        ep = me.coords["expert"]["ep"]
        for name, got in sr.expert_ids(me).items():
            assert got == range(3 * ep, 3 * ep + 3), f"plan B rank {rank} {name}: {got}"
        assert me.params["model.layers.0.mlp.experts.w1"].local_shape[0] < 3  # a piece only


def test_vocab_range(compiled: dict[str, tuple[str, str]]) -> None:
    """hsdp_tp: 11 embedding rows over tp 2 (6, 5), then FSDP 2 (3, 3 / 3, 2): the rank's
    vocab range is its tp coordinate's [0, 6) or [6, 11), not its FSDP piece; tp_uneven
    (13 rows over tp 4, no FSDP): 4, 4, 4, 1 rows. model.out.weight (9 rows) is not a
    vocab tensor of a model whose vocab_size is 11."""
    out = sr.OutDir(compiled["hsdp_tp"][0])
    for rank in range(out.world_size):
        me = out.rank(rank)
        want = [range(0, 6), range(6, 11)][me.coords["dense"]["tp"]]
        assert sr.vocab_range(me, "model.embed.weight") == want, rank
        assert sr.vocab_padding(me, "model.embed.weight") == 0
        assert me.params["model.embed.weight"].local_shape[0] < len(want)
        with pytest.raises(sr.PlanError, match="model.out.weight is not a vocab tensor"):
            sr.vocab_range(me, "model.out.weight")
    out = sr.OutDir(compiled["tp_uneven"][0])
    for rank in range(out.world_size):
        me = out.rank(rank)
        tp = me.coords["dense"]["tp"]
        assert sr.vocab_range(me, "model.embed.weight") == range(4 * tp, min(4 * tp + 4, 13))


def test_head_counts(shardc: str, tmp_path: Any) -> None:
    """Local head counts of a TP-sharded Hugging Face Llama (4 query, 2 KV heads, tp 2,
    FSDP2 4): query heads 2t..2t+1 and KV head t on tp rank t, from the TP-local
    (FSDP-unsharded) rows; a model file claiming one KV head makes a tp shard hold half
    of it: shardc refuses to compile it (E-HEADS), so no rank file states a cut head."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(vocab_size=37, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    AutoModelForCausalLM.from_config(config).save_pretrained(str(tmp_path / "ck"))
    recipe = os.path.join(harness.HERE, "cases", "hf_llama", "recipe.yaml")
    out = sr.OutDir(harness.compile_plan(shardc, str(tmp_path / "ck"), recipe,
                                         str(tmp_path / "out")))
    for rank in range(out.world_size):
        me = out.rank(rank)
        tp = me.coords["dense"]["tp"]
        want = sr.Heads(range(2 * tp, 2 * tp + 2), range(tp, tp + 1), range(tp, tp + 1))
        heads = sr.head_counts(me)
        assert heads == {f"model.layers.{i}.self_attn": want for i in range(2)}, heads
        assert all(h.q_heads == 2 and h.kv_heads == 1 for h in heads.values())
    with open(os.path.join(str(tmp_path / "ck"), "config.json")) as f:
        cfg = json.load(f)
    cfg["num_key_value_heads"] = 1
    with open(os.path.join(str(tmp_path / "ck"), "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(RuntimeError, match="E-HEADS"):
        harness.compile_plan(shardc, str(tmp_path / "ck"), recipe, str(tmp_path / "out1"))


def test_muon_layout_distrusted(compiled: dict[str, tuple[str, str]], tmp_path: Any) -> None:
    """The muon slots are the rank file's layout as the reader derives it once
    (`MuonBatch.slots`, docs/formats.md "Rank files: derived fields"); a rank file whose
    total_numel or own split size disagrees with that derivation is refused when read,
    naming the group and both values, and a piece of another shape is refused at packing."""
    outdir, _ = compiled["hsdp_tp"]
    me = sr.OutDir(outdir).rank(0)
    group = me.muon[0]
    batch = group.batches[0]
    first = batch.params[0]
    assert batch.slots[0][first].offset == 0
    assert sum(s.padded_numel for s in batch.slots[0].values()) == batch.total_numel[0]
    wrong = np.zeros([n + 1 for n in batch.slots[0][first].input_shape], dtype=np.uint8)
    with pytest.raises(sr.PlanError, match=f"muon {first} stage 0: piece"):
        muon.pack_stage(group, batch, 0, {**{n: wrong for n in batch.params}})
    for edit, says in (("total_numel", "total_numel .* != derived"),
                       ("split_sizes", "piece extent .* != split_sizes")):
        edited = str(tmp_path / edit)
        shutil.copytree(outdir, edited)
        out = sr.OutDir(edited)
        rel = out.rank_path(0)
        doc = json.load(open(os.path.join(edited, rel)))
        g = next(b for b in doc["buffers"] if b["kind"] == "muon_allgather")["groups"][0]
        if edit == "total_numel":
            g["batches"][0]["total_numel"][0] += 1
        else:  # this rank's own extent at stage 0, one more
            runs = g["params"][0]["split_sizes"][0]
            runs[:] = [[runs[0][0] + 1, 1]] + ([[runs[0][0], runs[0][1] - 1]]
                                               if runs[0][1] > 1 else []) + runs[1:]
        with open(os.path.join(edited, rel), "w") as f:
            json.dump(doc, f)
        resign(edited, rel)
        with pytest.raises(sr.PlanError, match=says):
            sr.OutDir(edited).rank(0)
