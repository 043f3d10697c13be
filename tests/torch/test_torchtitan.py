"""torchtitan judges shardc (issue 28 item 4): torchtitan 0.3.0 parallelizes its own
Llama-3 and DeepSeek-V3 with its own `parallelize_llama` / `parallelize_deepseekv3` (and
`pipeline_llm`) on the fake process group, rank by rank (titan.py); shardc compiles the
equivalent recipe of plans/ (docs/torchtitan.md maps torchtitan's config keys to recipe
fields) for the model torchtitan's module dumps to; on sampled ranks, param by param,
element-exact: which params the rank holds, the placement on every mesh axis, local
shape, global offset (physical: TP/EP piece plus FSDP2's chunk), FSDP2's padded sharded
shape, and every FSDP2 all-gather group (member order, padded numels, total)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

import judge
import titan
from titan import Setting

REPO = Path(__file__).resolve().parent.parent.parent
PLANS = REPO / "plans"

# torchtitan's mesh axis names -> the recipe's. Under `full_dtensor` the dense FSDP axis
# is `dp_shard` (cp folded in by fully_shard), under `partial_dtensor` the flattened
# `fsdp` (dp_shard x cp); with cp = 1 both are the recipe's `fsdp`.
AXIS_NAMES = {"dp_shard": "fsdp"}

SETTINGS = [
    Setting("torchtitan-llama3-8b-fsdp", "llama3", "8B", world=64),
    Setting("torchtitan-llama3-8b-fsdp-tp", "llama3", "8B", world=64, dp_shard=8, tp=8),
    Setting("torchtitan-llama3-8b-fsdp-tp", "llama3", "8B", world=64, dp_shard=8, tp=8,
            backend="full_dtensor"),
    Setting("torchtitan-llama3-8b-fsdp-tp-uneven", "llama3", "8B", world=96, dp_shard=12,
            tp=8),
    Setting("torchtitan-llama3-8b-hsdp-tp", "llama3", "8B", world=128, dp_replicate=2,
            dp_shard=8, tp=8),
    Setting("torchtitan-llama3-8b-pp-fsdp-tp", "llama3", "8B", world=64, pp=4, dp_shard=4,
            tp=4),
    # A V schedule: two stages per rank, rank r holding stages r and 2 pp - 1 - r.
    Setting("torchtitan-llama3-8b-pp-zbv-fsdp-tp", "llama3", "8B", world=64, pp=4, dp_shard=4,
            tp=4, schedule="ZBVZeroBubble"),
    Setting("torchtitan-llama3-8b-pp-zbv-fsdp-tp", "llama3", "8B", world=64, pp=4, dp_shard=4,
            tp=4, schedule="DualPipeV"),
    Setting("torchtitan-deepseek_v3-16b-fsdp-ep", "deepseek_v3", "16B", world=64, ep=8),
    Setting("torchtitan-deepseek_v3-16b-fsdp-tp-ep", "deepseek_v3", "16B", world=128,
            dp_shard=32, tp=4, ep=16),
    Setting("torchtitan-deepseek_v3-16b-fsdp-tp-ep-uneven", "deepseek_v3", "16B", world=24,
            dp_shard=6, tp=4, ep=8),
]


def compile_plan(shardc: str, setting: Setting, out: Path,
                 ranks: list[int] | None) -> dict[str, Any]:
    model = PLANS / f"{setting.model_name}.model.yaml"
    recipe = PLANS / f"{setting.name}.recipe.yaml"
    cmd = [shardc, "compile", str(model), str(recipe), "-o", str(out), "--force", "--quiet"]
    cmd += ["--ranks", ",".join(map(str, ranks))] if ranks else ["--no-rank-files"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"shardc compile failed:\n{res.stderr}"
    return judge.load_json(str(out / "plan.json"))


def shardc_view(plan: dict[str, Any], rank_file: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What shardc says rank `rank_file` holds: name -> placements (non-Replicate, by axis),
    local shape, global offset, padded shape."""
    by_name = {p["name"]: p for p in plan["params"]}
    out = {}
    for rp in rank_file["params"]:
        p = by_name[rp["name"]]
        axes = [a["name"] for a in plan["meshes"][p["mesh"]]]
        places = {a: lab for a, lab in zip(axes, p["placements"]) if lab != "Replicate()"}
        out[rp["name"]] = {"placements": places, "local_shape": rp["local_shape"],
                           "global_offset": rp["global_offset"],
                           "padded_shape": rp["padded_shape"]}
    return out


def torchtitan_view(layout: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for e in layout:
        places = {AXIS_NAMES.get(a, a): lab for a, lab in e["placements"].items()}
        out[e["name"]] = {"placements": places, "local_shape": e["local_shape"],
                          "global_offset": e["physical_offset"],
                          "padded_shape": e["padded_shape"]}
    return out


def compare(rank: int, ours: dict[str, dict[str, Any]],
            theirs: dict[str, dict[str, Any]]) -> list[judge.Mismatch]:
    bad = []
    for name in sorted(set(ours) | set(theirs)):
        if name not in theirs or name not in ours:
            bad.append(judge.Mismatch(rank, name, "held by the rank", name in ours,
                                      name in theirs))
            continue
        for field in ("placements", "local_shape", "global_offset", "padded_shape"):
            if ours[name][field] != theirs[name][field]:
                bad.append(judge.Mismatch(rank, name, field, ours[name][field],
                                          theirs[name][field]))
    return bad


def shardc_units(rank_file: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """shardc's FSDP2 units on this rank, keyed by their first member: name, mesh, members
    (rank-file order) with padded numels, total."""
    names = [p["name"] for p in rank_file["params"]]
    out = {}
    for buf in rank_file.get("buffers") or []:
        if buf.get("kind") != "fsdp2_allgather":
            continue
        for u in buf["units"]:
            members = [(names[m["param"]], m["padded_numel"]) for m in u["params"]]
            if members:
                out[members[0][0]] = {"unit": u["name"], "mesh": u["mesh"],
                                      "members": members, "total": u["total"]}
    return out


def torchtitan_units(units: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for u in units:
        members = [(m["name"], m["padded_numel"]) for m in u["members"]]
        if members:
            mesh = "expert" if "efsdp" in u["mesh"] else "dense"
            out[members[0][0]] = {"unit": u["modules"], "mesh": mesh, "members": members,
                                  "total": sum(n for _, n in members)}
    return out


def compare_units(rank: int, ours: dict[str, dict[str, Any]],
                  theirs: dict[str, dict[str, Any]]) -> list[judge.Mismatch]:
    """Each FSDP2 all-gather group (matched by its first member: torchtitan's and shardc's
    unit names differ, docs/torchtitan.md): mesh, member order with padded numels, total
    (all in elements: one dtype per group here)."""
    bad = []
    for first in sorted(set(ours) | set(theirs)):
        if first not in ours or first not in theirs:
            bad.append(judge.Mismatch(rank, f"FSDP2 group starting at {first}", "present",
                                      first in ours, first in theirs))
            continue
        for field in ("mesh", "members", "total"):
            if ours[first][field] != theirs[first][field]:
                bad.append(judge.Mismatch(rank, f"FSDP2 unit {ours[first]['unit']!r} "
                                          f"(torchtitan {theirs[first]['unit']})", field,
                                          ours[first][field], theirs[first][field]))
    return bad


def sample(plan: dict[str, Any], setting: Setting) -> list[int]:
    """judge.sample_ranks capped at 4 (torchtitan builds and parallelizes the whole model
    per rank, ~3-5 s), plus the last rank of every pipeline stage (pp is the slowest
    axis in torchtitan's mesh)."""
    ranks = set(judge.sample_ranks(plan, cap=4))
    per_stage = setting.world // setting.pp
    ranks |= {(stage + 1) * per_stage - 1 for stage in range(setting.pp)}
    return sorted(ranks)


@pytest.mark.parametrize("setting", SETTINGS, ids=[f"{s.name}/{s.backend}" for s in SETTINGS])
def test_torchtitan_agrees(shardc: str, tmp_path: Path, setting: Setting) -> None:
    out = tmp_path / "out"
    plan = compile_plan(shardc, setting, out, None)
    ranks = sample(plan, setting)
    compile_plan(shardc, setting, out, ranks)
    width = len(str(int(plan["world_size"]) - 1))
    dumps = titan.parallelize_ranks(setting, ranks)
    mismatches: list[judge.Mismatch] = []
    for rank in ranks:
        dump = dumps[rank]
        assert not isinstance(dump, str), f"rank {rank}: torchtitan failed: {dump}"
        layout = dump["params"]
        rank_file = judge.load_json(str(out / "ranks" / f"rank-{rank:0{width}d}.json"))
        ours = shardc_view(plan, rank_file)
        theirs = torchtitan_view(layout)
        sharded = sum(1 for v in theirs.values() if v["placements"])
        our_units, their_units = shardc_units(rank_file), torchtitan_units(dump["units"])
        print(f"rank {rank}: {len(theirs)} params from torchtitan ({sharded} sharded), "
              f"{len(ours)} in shardc's rank file; FSDP2 groups: {len(their_units)} "
              f"torchtitan, {len(our_units)} shardc")
        assert theirs and sharded, f"rank {rank}: torchtitan sharded nothing"
        assert their_units, f"rank {rank}: torchtitan made no FSDP2 group"
        mismatches += compare(rank, ours, theirs)
        mismatches += compare_units(rank, our_units, their_units)
        # DTensor's own reading of each label agrees with the physical layout here
        for e in layout:
            if e["global_offset"] != e["physical_offset"] or "dtensor_local_shape" in e:
                mismatches.append(judge.Mismatch(
                    rank, e["name"], "torchtitan: DTensor reading vs FSDP2 layout",
                    (e.get("dtensor_local_shape", e["local_shape"]), e["global_offset"]),
                    (e["local_shape"], e["physical_offset"])))
    assert not mismatches, "shardc and torchtitan disagree:\n" + "\n".join(
        str(m) for m in mismatches[:30])


def test_compare_names_param_rank_and_values() -> None:
    """The comparison fails on one changed offset, placement, held param or FSDP2 group
    member, naming both values."""
    theirs = {"w": {"placements": {"tp": "Shard(0)"}, "local_shape": [2, 4],
                    "global_offset": [2, 0], "padded_shape": [2, 4]}}
    ours = {"w": dict(theirs["w"], global_offset=[3, 0])}
    bad = compare(5, ours, theirs)
    assert [str(m) for m in bad] == [
        "rank 5: w: global_offset: shardc says [3, 0], PyTorch says [2, 0]"]
    ours = {"w": dict(theirs["w"], placements={"tp": "Shard(1)"})}
    assert [m.field for m in compare(5, ours, theirs)] == ["placements"]
    assert [m.field for m in compare(5, {}, theirs)] == ["held by the rank"]
    group = {"unit": "layers.0", "mesh": "dense", "members": [("a", 8), ("b", 4)], "total": 12}
    swapped = dict(group, members=[("a", 8), ("b", 5)], total=13)
    assert [m.field for m in compare_units(5, {"a": swapped}, {"a": group})] == [
        "members", "total"]
    assert not compare_units(5, {"a": group}, {"a": dict(group, unit=["layers.0"])})


def test_spmd_types_backend_fails_on_torch_2_13() -> None:
    """torchtitan 0.3's default backend `spmd_types` hands torch 2.13's fully_shard plain
    tensors with DataParallelMeshDims, which 2.13 refuses (docs/torchtitan.md). When a
    release accepts them, this fails: then judge `spmd_types` too."""
    setting = Setting("torchtitan-llama3-8b-fsdp-tp", "llama3", "8B", world=64, dp_shard=8,
                      tp=8, backend="spmd_types")
    result = titan.parallelize_ranks(setting, [0])[0]
    assert isinstance(result, str) and titan.SPMD_TYPES_ERROR in result, result
