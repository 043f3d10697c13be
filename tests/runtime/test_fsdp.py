"""FSDP2's own sharding equals the plan on real processes (issue 28 item 5; marker
`distributed`): `apply_fully_shard` by the plan's units on the plan's meshes, then
`fsdp2_mismatches` and the placements, for every plan with FSDP2 units: HSDP x TP
with mixed dtypes (hsdp_tp), expert FSDP beside dense FSDP with an empty EP rank (ep_efsdp),
pipeline stages with ties (tied_pp), uneven and empty shards (train_mlp), a tied lm_head
before its embedding in module order (tied_head_first), and the shrunk Gemma-2-2B FSDP2 x
TP4 plan. See fsdp_check.py.
"""

from __future__ import annotations

import json
import os
from typing import Any

import harness
import pytest
from test_distributed import CASES, PLANS, compile_case, mismatches, resign, run

pytestmark = pytest.mark.distributed


def test_fully_shard_agrees(shardc: str, tmp_path: Any) -> None:
    work = str(tmp_path)
    tasks: list[dict[str, Any]] = []
    for case in ["hsdp_tp", "ep_efsdp", "tied_pp", "train_mlp", "tied_head_first"]:
        out, _ = compile_case(shardc, work, case)
        tasks.append({"kind": "fsdp", "name": case, "outdir": out,
                      "recipe": os.path.join(CASES, case, "recipe.yaml")})
    model, recipe = "gemma-2-2b", "gemma-2-2b-tp4-tied"
    small = harness.shrink_model(os.path.join(PLANS, f"{model}.model.yaml"), harness.SHRINK[model],
                                 os.path.join(work, f"{model}.model.yaml"))
    out = harness.compile_plan(shardc, small, os.path.join(PLANS, f"{recipe}.recipe.yaml"),
                               os.path.join(work, recipe))
    tasks.append({"kind": "fsdp", "name": recipe, "outdir": out,
                  "recipe": os.path.join(PLANS, f"{recipe}.recipe.yaml")})
    # negative: rank 0's first layer unit lists its first two members swapped (manifest
    # re-signed): FSDP2's member order must be caught
    os.makedirs(os.path.join(work, "negative"))
    bad, _ = compile_case(shardc, os.path.join(work, "negative"), "hsdp_tp")
    path = os.path.join(bad, "ranks", "rank-0.json")
    doc = json.load(open(path))
    unit = next(u for b in doc["buffers"] if b["kind"] == "fsdp2_allgather" for u in b["units"]
                if u["name"] == "model.layers.0")
    unit["params"][0], unit["params"][1] = unit["params"][1], unit["params"][0]
    with open(path, "w") as f:
        json.dump(doc, f)
    resign(bad, "ranks/rank-0.json")
    tasks.append({"kind": "fsdp", "name": "swapped", "outdir": bad, "expect_mismatch": True,
                  "recipe": os.path.join(CASES, "hsdp_tp", "recipe.yaml")})
    ok, text = run(tasks, work)
    assert ok, mismatches(text) or text
    for task in tasks[:-1]:
        assert f"fsdp {task['name']}: ok" in text
    assert "MISMATCH swapped: unit 'model.layers.0' on rank 0: FSDP2 members" in text, text
    assert "EXPECTED: swapped" in text
