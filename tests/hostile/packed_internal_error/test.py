"""`packed` on a dim the placements do not split, on a negative dim, or with one-row parts is a
valid layout: validate and compile exit 0 with one box per part, never exit 3 (README.md here).
The kind is covered by tests/e2e/test_layout_property.py (random packed/pad/FP8 layouts)."""
import json


def run(h):
    w13 = "model.layers.0.mlp.w13.weight"
    for recipe, parts in (("packed_dim_pos1", [32, 32]), ("packed_dim_neg", [32, 32]),
                          ("packed_parts_256_each_1", [1] * 256)):
        h.expect_exit(h.shardc("validate", "model.yaml", f"{recipe}.recipe.yaml"), 0)
        out = h.tmp / recipe
        h.expect_exit(h.shardc("-q", "compile", "model.yaml", f"{recipe}.recipe.yaml", "-o", out), 0)
        h.expect_exit(h.shardc("verify", out), 0)
        if not out.joinpath("plan.json").exists():
            continue
        plan = json.loads((out / "plan.json").read_text())
        p = next(x for x in plan["params"] if x["name"] == w13)
        h.expect(p["packed"]["parts"] == parts, f"{recipe}: parts {p['packed']}")
        dim = p["packed"]["dim"]
        starts = [sum(parts[:i]) for i in range(len(parts) + 1)]
        for shard in p["shards"]:
            for box in shard.get("boxes", []):
                lo, hi = box["global_offset"][dim], box["global_offset"][dim] + box["shape"][dim]
                h.expect(any(a <= lo and hi <= b for a, b in zip(starts, starts[1:])),
                         f"{recipe} ranks {shard['ranks']}: box [{lo}, {hi}) crosses a part")
        rank0 = json.loads((out / "ranks" / "rank-0.json").read_text())
        q = next(x for x in rank0["params"] if x["name"] == w13)
        # tp 2 on dim 0: with parts on dim 1 rank 0 holds rows [0, 128) of both column parts
        # (2 boxes); with 256 one-row parts, chunk splits each row as [1, 0]: rank 0 holds the
        # row of every part (256 boxes), rank 1 none.
        want = 2 if len(parts) == 2 else 256
        h.expect(len(q["boxes"]) == want, f"{recipe}: rank 0 has {len(q['boxes'])} boxes, want {want}")
