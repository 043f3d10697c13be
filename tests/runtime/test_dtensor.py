"""The adapter hands a training script real DTensors and DCP checkpoints (issue 28
items 5 and 7; marker `distributed`: 8 gloo processes on 127.0.0.1).

* test_dtensors: for the feature cases and the shrunk shipped plans, the plan's
  DeviceMeshes (init_device_mesh with the recipe's axis names; the expert mesh
  too), every held param as a DTensor with the plan's placements (including
  `_StridedShard` where FSDP shards a TP shard), its local shard read from the
  safetensors checkpoint by slices (exactly its bytes), `full_tensor()` equal to
  the checkpoint bit for bit. Layouts DTensor cannot express are listed and
  must be exactly the expected ones.
* test_dcp_reshard: `dcp.save` under plan A, `dcp.load` under plan B: chunks
  saved = `checkpoint_metadata(A)`, every plan-B shard equal to the checkpoint,
  and the boxes DCP reads on each rank = `shardc reshard A B`'s reads.
"""

from __future__ import annotations

import os
from typing import Any

import harness
import pytest
from test_distributed import (CASES, FEATURES, PLANS, SHIPPED, compile_case, mismatches,
                              perturb, reshard_listing, run)

pytestmark = pytest.mark.distributed

# Params whose layout DTensor cannot state (e.g. `uneven: balanced` where it is not
# torch.chunk; tp_uneven's 7 rows over 4 are 2, 2, 2, 1 either way).
NOT_DTENSOR: dict[str, list[str]] = {}


def test_dtensors(shardc: str, tmp_path: Any) -> None:
    work, tasks = str(tmp_path), []
    for case in FEATURES:
        out, ckpt = compile_case(shardc, work, case)
        tasks.append({"kind": "dtensor", "name": case, "outdir": out, "ckpt": ckpt,
                      "not_dtensor": NOT_DTENSOR.get(case, [])})
    for model, recipe in SHIPPED:
        small = harness.shrink_model(os.path.join(PLANS, f"{model}.model.yaml"),
                                     harness.SHRINK[model], os.path.join(work, f"{model}.model.yaml"))
        out, ckpt = compile_case(shardc, work, recipe, small,
                                 os.path.join(PLANS, f"{recipe}.recipe.yaml"))
        tasks.append({"kind": "dtensor", "name": recipe, "outdir": out, "ckpt": ckpt})
    # negative: one shard class offset shifted by a row in plan.json and its holders' rank
    # files (re-signed, consistent): DTensor's own layout rule must refuse it, naming the
    # param, the rank and both values
    os.makedirs(os.path.join(work, "negative"))
    bad, ckpt = compile_case(shardc, os.path.join(work, "negative"), "hsdp_tp")
    param = "model.layers.0.up.weight"
    perturb(bad, 0, param)
    tasks.append({"kind": "dtensor", "name": "perturbed", "outdir": bad, "ckpt": ckpt,
                  "not_dtensor": [param]})
    ok, text = run(tasks, work)
    assert ok, mismatches(text) or text
    assert (f"NOT A DTENSOR perturbed: {param} on rank 0: DTensor [Replicate(), "
            f"_StridedShard(dim=0, sf=2), Shard(dim=0)] gives local shape [2, 6] at [0, 0], "
            f"the rank file [2, 6] at [1, 0]"
            in text), text
    for task in tasks:
        assert f"dtensor {task['name']}: ok" in text


# tp_uneven's plan B is `uneven: balanced` throughout: 13 embedding rows over tp 2 then
# FSDP 3 are 3, 2, 2 (balanced), not torch.chunk's 3, 3, 1, and so for proj_c: DTensor's
# Shard cannot state them, the adapter refuses them (PlanError) and they stay out.
RESHARD_B = {"tp_uneven": ["model.embed.weight", "model.layers.0.proj_c.weight",
                           "model.layers.1.proj_c.weight"]}


@pytest.mark.parametrize("case", ["hsdp_tp", "ep_efsdp", "tied_pp", "tp_uneven"])
def test_dcp_reshard(shardc: str, tmp_path: Any, case: str) -> None:
    work = str(tmp_path)
    a, ckpt = compile_case(shardc, work, case)
    b = harness.compile_plan(shardc, os.path.join(CASES, case, "model.yaml"),
                             os.path.join(CASES, case, "recipe_b.yaml"), os.path.join(work, "b"))
    listing = reshard_listing(shardc, a, b, os.path.join(work, "listing.json"), [])
    task = {"kind": "dcp", "name": case, "a": a, "b": b, "ckpt": ckpt, "listing": listing,
            "dcp_dir": os.path.join(work, "dcp"), "not_dtensor": RESHARD_B.get(case, [])}
    ok, text = run([task], work)
    assert ok, mismatches(text) or text
