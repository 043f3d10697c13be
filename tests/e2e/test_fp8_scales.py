#!/usr/bin/env python3
"""FP8 block scales follow their weights, end to end on DeepSeek-V3's FP8 checkpoint layout
(163 sparse safetensors files, F8_E4M3 weights + F32 weight_scale_inv, config.json with
quantization_config.weight_block_size [128, 128]; checkpoint_util.py):

* the shipped recipe (pp 16 x dp_shard 16 x tp 8, ep 64) validates on the directory with
  `fp8_scales` left at its default (auto -> follow);
* without FSDP, every scale shard in plan.json is exactly the block image of its weight's
  shard (re-derived here: rows [a, e) -> [a // 128, ceil(e / 128)), leading expert dims
  1:1) on the same rank set, with the weight's mesh, placements, stage and rule; stacked
  expert scales are `<stacked weight>_scale_inv` stacked from the checkpoint's scales;
* `explain` on a scale names the weight it follows; with FSDP, rank files carry each scale's local shape, global offset and bytes as
  plan.json's shard of that rank says;
* tp 32 (576 rows per rank = 4.5 blocks of the 18432-row dense MLP) fails cleanly: exit 1,
  only E-FP8-BLOCK, naming rank 0, the boundary 576, the block and the valid tp sizes;
  `unit: 128` on the MLP rules (its own hint) makes the same mesh valid;
* `shardc import DIR` carries weight_block_size, so the YAML fails the same way;
* `fp8_scales: rules` makes scales ordinary params (E-UNCOVERED without a rule for them).

Usage: test_fp8_scales.py --shardc BIN [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkpoint_util as cu  # noqa: E402
from checkpoint_util import run  # noqa: E402

RECIPE = cu.REPO / "plans" / "deepseek-v3-pp16-ep64.recipe.yaml"
SUFFIX = "_scale_inv"
BLOCK = 128


def ranks_of(text: str) -> frozenset[int]:
    """A rank set (`0-7,16,3-2043:8`) as a set of ranks."""
    out: set[int] = set()
    for item in filter(None, text.split(",")):
        span, _, step = item.partition(":")
        lo, _, hi = span.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1, int(step or 1)))
    return frozenset(out)


def block_image(shape: list[int], offset: list[int], scale_shape: list[int]) -> tuple:
    """Scale box of a weight box: leading dims 1:1, the last two in blocks of 128."""
    n = len(shape)
    out_shape, out_off = [], []
    for d in range(n):
        b = BLOCK if d >= n - 2 else 1
        if shape[d] == 0:  # empty piece: the DCP sentinel (global extent)
            out_shape.append(0)
            out_off.append(scale_shape[d])
            continue
        first = offset[d] // b
        out_shape.append(-(-(offset[d] + shape[d]) // b) - first)
        out_off.append(first)
    return tuple(out_shape), tuple(out_off)


def variant(text: str, dp_shard: int | None = None, tp: int | None = None,
            fsdp: bool = True, extra_top: str = "", unit_mlp: bool = False) -> str:
    if dp_shard is not None:
        text = text.replace("{name: dp_shard, size: 16}", f"{{name: dp_shard, size: {dp_shard}}}")
    if tp is not None:
        text = text.replace("{name: tp, size: 8}", f"{{name: tp, size: {tp}}}")
    if not fsdp:  # drop `fsdp:` and the `buffers:` after it (FSDP2 units need FSDP)
        text = text[:text.index("\nfsdp:")] + "\n"
    if unit_mlp:
        for rows in ('"model.layers.*.mlp.shared_experts.down_proj.weight"]',
                     '"model.layers.*.mlp.shared_experts.[gu]*_proj.weight"]'):
            assert rows in text, rows
            text = text.replace(rows, rows + "\n    unit: 128")
    return text + extra_top


def check_block_images(plan: dict) -> int:
    params = {p["name"]: p for p in plan["params"]}
    scales = [p for p in plan["params"] if p["name"].endswith(SUFFIX)]
    if not scales:
        raise AssertionError("no scales in plan.json")
    for s in scales:
        w = params.get(s["name"][:-len(SUFFIX)])
        if w is None:
            raise AssertionError(f"{s['name']}: no weight in plan.json")
        for key in ("mesh", "placements", "stage", "rule", "uneven"):
            if s[key] != w[key]:
                raise AssertionError(f"{s['name']}: {key} {s[key]} != weight's {w[key]}")
        want = {ranks_of(c["ranks"]): block_image(c["local_shape"], c["global_offset"],
                                                  s["global_shape"]) for c in w["shards"]}
        have = {ranks_of(c["ranks"]): (tuple(c["local_shape"]), tuple(c["global_offset"]))
                for c in s["shards"]}
        if have != want:
            for ranks, box in want.items():
                if have.get(ranks) != box:
                    raise AssertionError(f"{s['name']}: ranks {min(ranks)}..: scale box "
                                         f"{have.get(ranks)} != block image {box}")
            raise AssertionError(f"{s['name']}: rank sets differ from the weight's")
    return len(scales)


def check_stacked(plan: dict) -> None:
    params = {p["name"]: p for p in plan["params"]}
    s = params.get("model.layers.3.mlp.experts.gate_proj" + SUFFIX)
    if s is None:
        raise AssertionError("stacked expert scale model.layers.3.mlp.experts.gate_proj_scale_inv "
                             "missing")
    if s["global_shape"] != [256, 16, 56] or s["mesh"] != "expert":
        raise AssertionError(f"stacked scale: {s['global_shape']} on {s['mesh']}")
    sf = s["stacked_from"]
    if sf["count"] != 256 or sf["first"] != "model.layers.3.mlp.experts.0.gate_proj.weight" + SUFFIX:
        raise AssertionError(f"stacked scale stacked_from: {sf['count']} {sf['first']}")
    if any(".experts.17." in p["name"] for p in plan["params"]):
        raise AssertionError("an unstacked expert param or scale is left in plan.json")


def check_rank_file(out: Path, plan: dict) -> None:
    rank0 = json.loads(next((out / "ranks").iterdir()).read_text())
    by_name = {p["name"]: p for p in plan["params"]}
    seen = 0
    for p in rank0["params"]:
        if not p["name"].endswith(SUFFIX):
            continue
        seen += 1
        cls = [c for c in by_name[p["name"]]["shards"] if 0 in ranks_of(c["ranks"])]
        if len(cls) != 1 or cls[0]["local_shape"] != p["local_shape"] or \
                cls[0]["global_offset"] != p["global_offset"]:
            raise AssertionError(f"rank 0 {p['name']}: {p['local_shape']} @ {p['global_offset']} "
                                 f"!= plan.json {cls}")
        numel = 1
        for x in p["local_shape"]:
            numel *= x
        if p["dtype"] != "float32" or p["numel"] != numel or p["bytes"] != 4 * numel:
            raise AssertionError(f"rank 0 {p['name']}: numel/bytes {p['numel']}/{p['bytes']}")
    if seen == 0:
        raise AssertionError("rank 0 holds no scale")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--keep", help="work here and keep the files")
    args = ap.parse_args()
    S = args.shardc

    def body(work: Path) -> None:
        ckpt = work / "DeepSeek-V3-fp8"
        if not ckpt.exists():
            cu.write_checkpoint(cu.load_inventory("DeepSeek-V3"), cu.load_config("DeepSeek-V3"),
                                ckpt, fp8=True, num_files=163)
        base = RECIPE.read_text()
        run([S, "validate", str(ckpt), str(RECIPE)])
        print("ok: shipped recipe validates on the FP8 checkpoint (fp8_scales: auto -> follow)")

        no_fsdp = work / "no-fsdp.recipe.yaml"
        no_fsdp.write_text(variant(base, fsdp=False))
        run([S, "compile", str(ckpt), str(no_fsdp), "-o", str(work / "out-tp"),
             "--no-rank-files"])
        plan = json.loads((work / "out-tp" / "plan.json").read_text())
        n = check_block_images(plan)
        check_stacked(plan)
        print(f"ok: {n} scales are the block images of their weights' shards (no FSDP)")

        r = run([S, "explain", str(ckpt), str(RECIPE),
                 "model.layers.0.self_attn.q_b_proj.weight_scale_inv"])
        if "follows model.layers.0.self_attn.q_b_proj.weight" not in r.stdout:
            raise AssertionError(f"explain does not name the weight a scale follows:\n{r.stdout}")

        run([S, "compile", str(ckpt), str(RECIPE), "-o", str(work / "out-fsdp"), "--ranks", "0"])
        check_rank_file(work / "out-fsdp",
                        json.loads((work / "out-fsdp" / "plan.json").read_text()))
        print("ok: with FSDP, rank 0's file carries every scale's shard as plan.json says")

        tp32 = work / "tp32.recipe.yaml"
        tp32.write_text(variant(base, dp_shard=4, tp=32))
        r = run([S, "validate", str(ckpt), str(tp32), "--format", "json"], expect=1)
        diags = json.loads(r.stdout)
        errors = {d["code"] for d in diags if d["severity"] == "error"}
        if errors != {"E-FP8-BLOCK"}:
            raise AssertionError(f"tp 32: error codes {errors}, want only E-FP8-BLOCK")
        first = next(d for d in diags if d["code"] == "E-FP8-BLOCK")
        for text in ("model.layers.0.mlp.gate_proj.weight dim 0: rank 0 holds elements [0, 576)",
                     "boundary at element 576 cuts an FP8 block of 128",
                     "(128 of 2048 ranks hold such a shard)"):
            if text not in first["message"]:
                raise AssertionError(f"tp 32 message lacks {text!r}: {first['message']}")
        if "1, 2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 36, 48, 72, 144" not in first["hint"]:
            raise AssertionError(f"tp 32 hint lacks the valid sizes: {first['hint']}")
        print("ok: tp 32 cuts blocks: E-FP8-BLOCK with rank, boundary, block and valid sizes")

        fixed = work / "tp32-unit.recipe.yaml"
        fixed.write_text(variant(base, dp_shard=4, tp=32, unit_mlp=True))
        run([S, "validate", str(ckpt), str(fixed)])
        print("ok: tp 32 with `unit: 128` on the MLP rules validates (the hint's fix)")

        yaml = work / "dsv3-fp8.model.yaml"
        run([S, "import", str(ckpt), "-o", str(yaml)])
        if "weight_block_size: [128, 128]" not in yaml.read_text():
            raise AssertionError("import YAML lacks weight_block_size")
        r = run([S, "validate", str(yaml), str(tp32), "--format", "json"], expect=1)
        if {d["code"] for d in json.loads(r.stdout) if d["severity"] == "error"} != {"E-FP8-BLOCK"}:
            raise AssertionError("imported YAML: tp 32 is not E-FP8-BLOCK")
        print("ok: the imported model YAML keeps the block size and fails the same way")

        rules = work / "rules.recipe.yaml"
        rules.write_text(variant(base, extra_top="fp8_scales: rules\n"))
        r = run([S, "validate", str(ckpt), str(rules), "--format", "json"], expect=1)
        unc = [d for d in json.loads(r.stdout) if d["code"] == "E-UNCOVERED"]
        if not unc or not any("weight_scale_inv" in d["message"] for d in unc):
            raise AssertionError(f"fp8_scales: rules: no E-UNCOVERED for a scale: {r.stdout[:2000]}")
        print("ok: fp8_scales: rules leaves scales to the rules (E-UNCOVERED without one)")

    return cu.run_checks(args.keep, "shardc-fp8-", body)

if __name__ == "__main__":
    sys.exit(main())
