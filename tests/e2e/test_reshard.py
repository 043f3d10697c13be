#!/usr/bin/env python3
"""`shardc reshard` between plan variants, proven by an independent reader of plan.json.

    test_reshard.py --shardc BIN [--only NAME] [--keep DIR]

For every pair below: compile plan A and plan B (plan.json only), run
`shardc reshard A/ B/ -o listing.json` (plus `--ranks-per-node` for some pairs), and
check the listing against the two plan.json files, re-reading them here (rank-set syntax
included) without any code of shardc:

* every listed plan-B rank lists exactly the params plan B gives it, in plan order, with
  plan B's local shape and global offset; tied aliases on their source's stage share
  storage (no reads), other params are read;
* every read is a non-empty box inside the destination's local tensor at
  `dst_offset` (= global_offset - the destination's offset); its `src` holds, in plan A,
  a shard of the same param containing the box, and `src_offset` is the box's place in
  that shard; `bytes` = numel x element size;
* packed params (plan.json `boxes`, issue 27 item 5): a read lies inside one box of the
  destination and one box of plan A (or the same box of several plan-A shards: a part with
  `replicas`, whose holders are then all of theirs), and its offsets are those boxes'
  `local_offset` plus its place in the box;
* the reads of a (rank, param) tile its local tensor exactly once: pairwise disjoint,
  inside, and their element counts sum to the local numel (with numpy available, small
  tensors are also counted element by element: every element covered exactly once);
* the source is the one the rule names: the destination itself when its plan-A shard
  contains the box (and only then), else the lowest holder on its node
  (`--ranks-per-node`), else the lowest holder;
* bytes: per rank, sum of reads = dest_bytes, reads from itself = in_place_bytes,
  others = moved_bytes; in-place bytes are recomputed here independently (the
  intersection of the rank's plan-A and plan-B boxes per param); totals and per-rank
  min/median/max agree with the per-rank values of every rank;
* the listing validates against schemas/reshard.schema.json (when python3-jsonschema is
  installed) and the MODEL RECIPE form gives the same listing as the plan.json form;
* a pair whose models differ (a param's shape, a dtype, a missing param) exits 1 with
  E-RESHARD-MISMATCH / E-RESHARD-MISSING located in plan B.
Stdlib only (numpy optional). Exit 0 all pass, 1 a check failed, 2 harness error.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLANS = REPO / "plans"
VARIANTS = REPO / "tests" / "data" / "reshard"
PACKED = REPO / "tests" / "data" / "packed"

try:
    import numpy as np  # type: ignore
except ImportError:  # pragma: no cover - the box proof stands alone
    np = None

ESIZE = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1,
         "float8_e5m2": 1, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
         "bool": 1, "uint16": 2, "uint32": 4, "uint64": 8, "float8_e8m0fnu": 1}

# name: (model, recipe A, recipe B, ranks-per-node or None, what it covers)
PAIRS = {
    "gpt2-tp4-to-pp2": ("gpt2", PLANS / "gpt2-tp4-tied.recipe.yaml",
                        VARIANTS / "gpt2-pp2-tp2.recipe.yaml", None,
                        "tp 4 -> pp 2 x tp 2; the tie crosses stages in B (alias copied)"),
    "gpt2-pp2-to-tp4": ("gpt2", VARIANTS / "gpt2-pp2-tp2.recipe.yaml",
                        PLANS / "gpt2-tp4-tied.recipe.yaml", 4,
                        "pipeline merged; alias shares storage in B; nodes of 4"),
    "gpt2-tp4-to-fsdp3": ("gpt2", PLANS / "gpt2-tp4-tied.recipe.yaml",
                          VARIANTS / "gpt2-fsdp3-tp2.recipe.yaml", 2,
                          "8 -> 6 ranks (ranks 6-7 only send), uneven FSDP 3, nodes of 2"),
    "qwen-tp2-to-fsdp3": ("qwen2.5-0.5b", PLANS / "qwen2.5-0.5b-dp4-tp2.recipe.yaml",
                          VARIANTS / "qwen2.5-0.5b-fsdp3-tp2.recipe.yaml", None,
                          "dp 4 x tp 2 -> FSDP 3 x tp 2 on 6 ranks, uneven rows"),
    "qwen-fsdp3-to-tp2": ("qwen2.5-0.5b", VARIANTS / "qwen2.5-0.5b-fsdp3-tp2.recipe.yaml",
                          PLANS / "qwen2.5-0.5b-dp4-tp2.recipe.yaml", 2,
                          "6 -> 8 ranks: ranks 6-7 hold nothing in A"),
    "mixtral-ep8-to-ep4": ("mixtral-8x7b", PLANS / "mixtral-8x7b-ep8-tp8.recipe.yaml",
                           VARIANTS / "mixtral-8x7b-ep4-tp4.recipe.yaml", 8,
                           "EP 8 x TP 8 (64) -> EP 4 x TP 4 (32), stacked experts"),
    "qwen3-ep8-to-pp2": ("qwen3-30b-a3b", PLANS / "qwen3-30b-a3b-ep8-fsdp.recipe.yaml",
                         VARIANTS / "qwen3-30b-a3b-ep4-efsdp4.recipe.yaml", None,
                         "FSDP 64 + EP 8 -> pp 2 x FSDP 8, EP 4 x EFSDP 2 (16 ranks)"),
    "llama8b-tp8-to-pp4": ("llama-3.1-8b", PLANS / "llama-3.1-8b-dp8-tp8.recipe.yaml",
                           VARIANTS / "llama-3.1-8b-pp4-fsdp4-tp4.recipe.yaml", 8,
                           "dp 8 x tp 8 -> pp 4 x FSDP 4 x tp 4, same 64 ranks"),
    # Packed params (issue 27 items 5 and 7): several boxes per rank, replicated parts.
    "gpt2-heads-to-fsdp3": ("gpt2", PLANS / "gpt2-tp4-heads.recipe.yaml",
                            VARIANTS / "gpt2-heads-fsdp3-tp2.recipe.yaml", 2,
                            "packed c_attn (3 boxes per rank) tp 4 -> packed tp 2 x FSDP 3"),
    "gpt2-heads-to-plain": ("gpt2", PLANS / "gpt2-tp4-heads.recipe.yaml",
                            VARIANTS / "gpt2-fsdp3-tp2.recipe.yaml", None,
                            "packed c_attn tp 4 -> unpacked (c_attn replicated over tp)"),
    # Parts with their own placement (issue 27 item 7): KV heads replicated over tp ranks.
    "fused-qkv-tp4-to-tp16": (PACKED / "llama-3.1-8b-fused-qkv.model.yaml",
                              PACKED / "llama-3.1-8b-fused-qkv-tp4.recipe.yaml",
                              PACKED / "llama-3.1-8b-fused-qkv-tp16.recipe.yaml", 8,
                              "Llama-8B fused qkv tp 4 -> tp 16, KV heads replicas 2 in B"),
    "fused-qkv-tp16-to-tp4": (PACKED / "llama-3.1-8b-fused-qkv.model.yaml",
                              PACKED / "llama-3.1-8b-fused-qkv-tp16.recipe.yaml",
                              PACKED / "llama-3.1-8b-fused-qkv-tp4.recipe.yaml", None,
                              "tp 16 -> tp 4: each KV piece held by 2 plan-A classes"),
    "gqa-tp2-to-tp4": (PACKED / "gqa-2kv.model.yaml", PACKED / "gqa-2kv-tp2.recipe.yaml",
                       PACKED / "gqa-2kv-tp4.recipe.yaml", None,
                       "2 KV heads: tp 2 x dp 2 -> tp 4 (replicas 2); per-group linear_qkv"),
    "gqa-tp4-to-tp8": (PACKED / "gqa-2kv.model.yaml", PACKED / "gqa-2kv-tp4.recipe.yaml",
                       PACKED / "gqa-2kv-tp8.recipe.yaml", 2,
                       "replicas 2 -> replicas 8 (k and v whole on every rank)"),
}


# ----------------------------------------------------------------- plan.json, read here


def parse_ranks(text: str) -> list[int]:
    """The rank-set syntax of README 'Rank sets': `0-7,16,3-99:8`."""
    out: list[int] = []
    for item in text.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item)
        if not m:
            raise ValueError(f"bad rank set item {item!r}")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        s = int(m.group(3)) if m.group(3) else 1
        out.extend(range(a, b + 1, s))
    return out


class Plan:
    def __init__(self, path: Path):
        doc = json.loads(path.read_text())
        self.world = doc["world_size"]
        self.params = doc["params"]
        self.by_name = {p["name"]: p for p in self.params}
        # rank -> {param name: shard}
        self.held: dict[int, dict[str, dict]] = {}
        for p in self.params:
            for s in p["shards"]:
                for r in parse_ranks(s["ranks"]):
                    if p["name"] in self.held.setdefault(r, {}):
                        raise ValueError(f"rank {r} holds {p['name']} twice")
                    self.held[r][p["name"]] = s
                s["_ranks"] = set(parse_ranks(s["ranks"]))

    def shares_storage(self, p: dict) -> bool:
        src = p.get("alias_of")
        return src is not None and self.by_name[src]["stage"] == p["stage"]


def numel(shape) -> int:
    n = 1
    for e in shape:
        n *= e
    return n


def inside(off, shape, outer_off, outer_shape) -> bool:
    return all(o >= oo and o + e <= oo + oe
               for o, e, oo, oe in zip(off, shape, outer_off, outer_shape))


def overlap(a_off, a_shape, b_off, b_shape) -> int:
    n = 1
    for ao, ae, bo, be in zip(a_off, a_shape, b_off, b_shape):
        n *= max(0, min(ao + ae, bo + be) - max(ao, bo))
    return n


def boxes_of(shard: dict) -> list[tuple[list[int], list[int], list[int]]]:
    """(global_offset, shape, local_offset) of every non-empty box of a plan.json shard: its
    `boxes` for a packed param (docs/semantics.md "Packed (fused) parameters"), else the one box
    global_offset + local_shape at local 0."""
    if "boxes" in shard:
        return [(b["global_offset"], b["shape"], b["local_offset"]) for b in shard["boxes"]
                if 0 not in b["shape"]]
    if 0 in shard["local_shape"]:
        return []
    return [(shard["global_offset"], shard["local_shape"], [0] * len(shard["local_shape"]))]


def local_extent(shard: dict) -> list[int]:
    """The local tensor the offsets index: padded_shape for a packed param (its boxes sit at
    local offsets of the allocation, pad rows of a part between them), else local_shape."""
    return shard["padded_shape"] if "boxes" in shard else shard["local_shape"]


def expected_source(holders: set[int], dst: int, rpn: int | None) -> int:
    if dst in holders:
        return dst
    if rpn:
        same = [r for r in holders if r // rpn == dst // rpn]
        if same:
            return min(same)
    return min(holders)


# ----------------------------------------------------------------- the checks


class Checker:
    def __init__(self, a: Plan, b: Plan, listing: dict, rpn: int | None):
        self.a, self.b, self.l, self.rpn = a, b, listing, rpn
        self.problems: list[str] = []
        self.counted = 0  # (rank, param) tiles counted element by element

    def fail(self, msg: str) -> None:
        if len(self.problems) < 30:
            self.problems.append(msg)

    def run(self) -> list[str]:
        l = self.l
        if l["format"] != "shardc.reshard/v1":
            self.fail(f"format {l['format']!r}")
        if l["from"]["world_size"] != self.a.world or l["to"]["world_size"] != self.b.world:
            self.fail("world sizes differ from the plans")
        if l["ranks_per_node"] != self.rpn:
            self.fail(f"ranks_per_node {l['ranks_per_node']} != {self.rpn}")
        listed = [r["rank"] for r in l["ranks"]]
        if listed != list(range(self.b.world)):
            self.fail(f"listed ranks {listed[:8]}... are not every plan-B rank in order")
        totals = {"dest_bytes": 0, "moved_bytes": 0, "in_place_bytes": 0}
        per_rank: dict[str, list[int]] = {k: [] for k in totals}
        for entry in l["ranks"]:
            got = self.check_rank(entry)
            for k in totals:
                totals[k] += got[k]
                per_rank[k].append(got[k])
                if entry[k] != got[k]:
                    self.fail(f"rank {entry['rank']}: {k} {entry[k]} but its reads give {got[k]}")
        for k, v in totals.items():
            if l["totals"][k] != v:
                self.fail(f"totals.{k} {l['totals'][k]} != sum over ranks {v}")
            vals = sorted(per_rank[k])
            want = {"min": vals[0], "median": vals[(len(vals) - 1) // 2], "max": vals[-1]}
            if l["per_rank"][k] != want:
                self.fail(f"per_rank.{k} {l['per_rank'][k]} != {want}")
        if totals["dest_bytes"] != totals["moved_bytes"] + totals["in_place_bytes"]:
            self.fail("dest != moved + in place")
        return self.problems

    def check_rank(self, entry: dict) -> dict[str, int]:
        rank = entry["rank"]
        want = self.b.held.get(rank, {})
        names = [p["name"] for p in entry["params"]]
        order = [p["name"] for p in self.b.params if p["name"] in want]
        if names != order:
            self.fail(f"rank {rank}: params {names[:5]}... != plan B's {order[:5]}...")
        sums = {"dest_bytes": 0, "moved_bytes": 0, "in_place_bytes": 0}
        for p in entry["params"]:
            if p["name"] not in want:
                continue
            self.check_param(rank, p, want[p["name"]], sums)
        return sums

    def check_param(self, rank: int, p: dict, shard: dict, sums: dict[str, int]) -> None:
        where = f"rank {rank} {p['name']}"
        bp = self.b.by_name[p["name"]]
        ap = self.a.by_name.get(p["name"])
        if ap is None:
            self.fail(f"{where}: not in plan A but listed")
            return
        if p["local_shape"] != shard["local_shape"] or p["global_offset"] != shard["global_offset"]:
            self.fail(f"{where}: local box differs from plan B's shard")
        if p["dtype"] != bp["dtype"] or p["global_shape"] != bp["global_shape"]:
            self.fail(f"{where}: dtype/global_shape differ from plan B")
        shares = self.b.shares_storage(bp)
        if (p["shares_storage_with"] is not None) != shares or (
                shares and p["shares_storage_with"] != bp["alias_of"]):
            self.fail(f"{where}: shares_storage_with {p['shares_storage_with']!r}, "
                      f"plan B alias_of {bp.get('alias_of')!r} stage {bp['stage']}")
        reads = p["reads"]
        if shares:
            if reads:
                self.fail(f"{where}: an alias sharing storage has reads")
            return
        esize = ESIZE[bp["dtype"]]
        local = shard["local_shape"]
        mine = boxes_of(shard)
        total = numel(local)
        count = 0
        for rd in reads:
            count += numel(rd["shape"])
            self.check_read(where, rank, rd, ap, shard, esize, sums)
        if count != total:
            self.fail(f"{where}: reads cover {count} elements, local tensor has {total}")
        for i in range(len(reads)):
            for j in range(i):
                if overlap(reads[i]["dst_offset"], reads[i]["shape"],
                           reads[j]["dst_offset"], reads[j]["shape"]):
                    self.fail(f"{where}: reads {j} and {i} overlap")
        extent = local_extent(shard)
        if np is not None and 0 < numel(extent) <= (1 << 20) and (len(reads) > 1 or mine[1:]):
            # Every element of the local tensor's boxes written exactly once, nothing else.
            hits = np.zeros(extent, dtype=np.int32)
            want = np.zeros(extent, dtype=np.int32)
            for rd in reads:
                hits[tuple(slice(o, o + e) for o, e in zip(rd["dst_offset"], rd["shape"]))] += 1
            for _, shape, loff in mine:
                want[tuple(slice(o, o + e) for o, e in zip(loff, shape))] += 1
            if not (hits == want).all() or not (want <= 1).all():
                self.fail(f"{where}: element counts {np.unique(hits)} differ from the boxes'")
            self.counted += 1
        # In place, recomputed from the plans alone: the rank's plan-A and plan-B boxes.
        a_shard = self.a.held.get(rank, {}).get(p["name"])
        in_place = 0
        if a_shard is not None:
            in_place = sum(overlap(ga, sa, gb, sb) for ga, sa, _ in boxes_of(a_shard)
                           for gb, sb, _ in mine)
        got = sum(numel(rd["shape"]) for rd in reads if rd["src"] == rank)
        if got != in_place:
            self.fail(f"{where}: {got} elements read in place, plans say {in_place}")
        sums["dest_bytes"] += total * esize

    def check_read(self, where: str, rank: int, rd: dict, ap: dict, shard: dict, esize: int,
                   sums: dict[str, int]) -> None:
        g, shape = rd["global_offset"], rd["shape"]
        if any(e < 1 for e in shape):
            self.fail(f"{where}: empty read {rd}")
        # The destination box holding the read, and its place in the local tensor.
        dst = [(goff, loff) for goff, bshape, loff in boxes_of(shard)
               if inside(g, shape, goff, bshape)]
        if len(dst) != 1:
            self.fail(f"{where}: {len(dst)} of its plan-B boxes contain the read {g} {shape}")
            return
        goff, loff = dst[0]
        if [o + x - y for o, x, y in zip(loff, g, goff)] != rd["dst_offset"]:
            self.fail(f"{where}: dst_offset {rd['dst_offset']} is not the box's place "
                      f"{loff} + {g} - {goff}")
        if not inside(rd["dst_offset"], shape, [0] * len(shape), local_extent(shard)):
            self.fail(f"{where}: read {rd} outside the local tensor {local_extent(shard)}")
        if rd["bytes"] != numel(shape) * esize:
            self.fail(f"{where}: bytes {rd['bytes']} != numel x {esize}")
        # The plan-A boxes containing the box: one, or (a packed part with replicas) the same
        # box in several shards; the holders are the union of their ranks.
        holding = [(s, goff, loff) for s in ap["shards"] for goff, bshape, loff in boxes_of(s)
                   if inside(g, shape, goff, bshape)]
        if not holding or len({tuple(goff) for _, goff, _ in holding}) != 1:
            self.fail(f"{where}: {len(holding)} plan-A boxes contain the box {g} {shape}")
            return
        holders = set().union(*(s["_ranks"] for s, _, _ in holding))
        src = [(s, goff, loff) for s, goff, loff in holding if rd["src"] in s["_ranks"]]
        if not src:
            self.fail(f"{where}: src {rd['src']} does not hold the box in plan A")
            return
        _, goff, loff = src[0]
        if [o + x - y for o, x, y in zip(loff, g, goff)] != rd["src_offset"]:
            self.fail(f"{where}: src_offset {rd['src_offset']} wrong")
        want = expected_source(holders, rank, self.rpn)
        if rd["src"] != want:
            self.fail(f"{where}: src {rd['src']}, the rule names {want}")
        key = "in_place_bytes" if rd["src"] == rank else "moved_bytes"
        sums[key] += rd["bytes"]


# ----------------------------------------------------------------- driver


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)


def compile_plan(shardc: str, model: Path, recipe: Path, out: Path) -> None:
    p = run([shardc, "-q", "compile", model, recipe, "-o", out, "--no-rank-files", "--force"])
    if p.returncode != 0:
        raise RuntimeError(f"compile {recipe.name} failed:\n{p.stderr}")


def validate_schema(listing: dict) -> list[str]:
    try:
        import jsonschema  # type: ignore
    except ImportError:
        return []
    schema = json.loads((REPO / "schemas" / "reshard.schema.json").read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(listing),
                    key=lambda e: list(e.path))
    return [f"schema: {'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]


def check_pair(shardc: str, name: str, tmp: Path) -> list[str]:
    model_name, ra, rb, rpn, what = PAIRS[name]
    model = model_name if isinstance(model_name, Path) else PLANS / f"{model_name}.model.yaml"
    da, db = tmp / f"{name}-a", tmp / f"{name}-b"
    compile_plan(shardc, model, ra, da)
    compile_plan(shardc, model, rb, db)
    out = tmp / f"{name}.json"
    extra = ["--ranks-per-node", str(rpn)] if rpn else []
    p = run([shardc, "reshard", da, db, "-o", out] + extra)
    if p.returncode != 0:
        return [f"reshard exit {p.returncode}: {p.stderr}"]
    summary = p.stdout
    listing = json.loads(out.read_text())
    problems = validate_schema(listing)
    a, b = Plan(da / "plan.json"), Plan(db / "plan.json")
    checker = Checker(a, b, listing, rpn)
    problems += checker.run()
    t = listing["totals"]
    frac = t["in_place_bytes"] / t["dest_bytes"] if t["dest_bytes"] else 0.0
    if f"({100 * frac:.1f}% of destination bytes)" not in summary:
        problems.append(f"summary does not state the in-place fraction {100 * frac:.1f}%:\n{summary}")
    # The MODEL RECIPE form plans the same transfers.
    q = run([shardc, "reshard", model, ra, model, rb, "--format", "json"] + extra)
    if q.returncode != 0:
        problems.append(f"MODEL RECIPE form exit {q.returncode}: {q.stderr}")
    else:
        other = json.loads(q.stdout)
        for key in ("totals", "per_rank", "ranks"):
            if other[key] != listing[key]:
                problems.append(f"MODEL RECIPE form differs in {key!r}")
    reads = sum(len(p["reads"]) for r in listing["ranks"] for p in r["params"])
    print(f"  {name}: {what}; {a.world} -> {b.world} ranks, {t['pieces']} pieces, "
          f"{reads} reads, moved {t['moved_bytes']} B, in place {100 * frac:.1f}%, "
          f"{checker.counted} tiles element-counted")
    return problems


MISMATCH_MODEL_EDITS = [
    # (what, edit of the gpt2 model text, expected code)
    ("shape", lambda t: t.replace("name: transformer.wpe.weight, shape: [1024, 768]",
                                  "name: transformer.wpe.weight, shape: [2048, 768]", 1),
     "E-RESHARD-MISMATCH"),
    ("dtype", lambda t: t.replace("name: transformer.wpe.weight, shape: [1024, 768]",
                                  "name: transformer.wpe.weight, shape: [1024, 768], "
                                  "dtype: float16", 1),
     "E-RESHARD-MISMATCH"),
]


def check_mismatch(shardc: str, tmp: Path) -> list[str]:
    problems: list[str] = []
    base = (PLANS / "gpt2.model.yaml").read_text()
    recipe = PLANS / "gpt2-tp4-tied.recipe.yaml"
    da = tmp / "mm-a"
    compile_plan(shardc, PLANS / "gpt2.model.yaml", recipe, da)
    for what, edit, code in MISMATCH_MODEL_EDITS:
        text = edit(base)
        if text == base:
            return [f"mismatch '{what}': the edit did not apply (model text changed?)"]
        model = tmp / f"gpt2-{what}.model.yaml"
        model.write_text(text)
        db = tmp / f"mm-b-{what}"
        compile_plan(shardc, model, recipe, db)
        p = run([shardc, "reshard", da, db, "--diag-format", "json"])
        diags = json.loads(p.stdout) if p.stdout.strip() else []
        hits = [d for d in diags if d["code"] == code and d["param"] == "transformer.wpe.weight"]
        if p.returncode != 1 or not hits:
            problems.append(f"mismatch '{what}': exit {p.returncode}, diagnostics {diags}")
            continue
        d = hits[0]
        if not d["file"].endswith("plan.json") or d["line"] < 1 or not d["hint"]:
            problems.append(f"mismatch '{what}': not located in plan B's plan.json: {d}")
        print(f"  mismatch/{what}: exit 1, {code} at {Path(d['file']).name}:{d['line']}:"
              f"{d['column']}")
    # A param of B absent from A (the recipe's catch-all rule places it).
    model = tmp / "gpt2-extra.model.yaml"
    anchor = "  - {name: transformer.wpe.weight, shape: [1024, 768]}\n"
    model.write_text(base.replace(anchor, anchor + "  - {name: transformer.extra, shape: [8]}\n", 1))
    db = tmp / "mm-b-extra"
    compile_plan(shardc, model, recipe, db)
    p = run([shardc, "reshard", da, db, "--diag-format", "json"])
    diags = json.loads(p.stdout) if p.stdout.strip() else []
    if p.returncode != 1 or not any(d["code"] == "E-RESHARD-MISSING" and
                                    d["param"] == "transformer.extra" for d in diags):
        problems.append(f"missing param: exit {p.returncode}, diagnostics {diags}")
    else:
        print("  mismatch/missing: exit 1, E-RESHARD-MISSING")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--only", help="run only this pair (or 'mismatch')")
    ap.add_argument("--keep", help="write outputs here and keep them")
    args = ap.parse_args()
    names = list(PAIRS) + ["mismatch"]
    if args.only:
        if args.only not in names:
            print(f"test_reshard: unknown pair {args.only!r}; one of {names}", file=sys.stderr)
            return 2
        names = [args.only]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="shardc-reshard-") as tmp_name:
        tmp = Path(args.keep) if args.keep else Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        for name in names:
            try:
                problems = check_mismatch(args.shardc, tmp) if name == "mismatch" else \
                    check_pair(args.shardc, name, tmp)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                print(f"test_reshard: {name}: {e}", file=sys.stderr)
                return 2
            if problems:
                failed += 1
                print(f"FAIL {name}")
                for p in problems:
                    print("    " + p)
    print(f"test_reshard: {len(names) - failed}/{len(names)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
