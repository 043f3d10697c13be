"""A forward + backward + optimizer step on the plan's FSDP2 + TP layout equals one
process running the same model unsharded (issue 28 item 7; marker `distributed`).

cases/train_mlp: FSDP2 (dp_shard 4) x TP 2 on 8 gloo processes, float32, uneven and
empty FSDP shards of TP shards. FSDP2's own sharding (per-param sharded and padded
size, all-gather member order, DTensor placements) must equal the plan first. See
train.py for the steps and tolerances, tests/runtime/README.md for
pytorch/pytorch#162338 (gloo AVG reduction under FSDP2).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_distributed import compile_case, mismatches, run

pytestmark = pytest.mark.distributed


def test_train_step(shardc: str, tmp_path: Any) -> None:
    work = str(tmp_path)
    out, ckpt = compile_case(shardc, work, "train_mlp")
    # the same launch, with FSDP2 told to divide gradients by 1 (summed over the 4 FSDP
    # ranks, as #162338 made gloo do silently): the comparison must catch it
    tasks: list[dict[str, Any]] = [{"kind": "train", "name": "train_mlp", "outdir": out, "ckpt": ckpt},
             {"kind": "train", "name": "summed", "outdir": out, "ckpt": ckpt, "divide_factor": 1,
              "expect_mismatch": True}]
    ok, text = run(tasks, work)
    assert ok, mismatches(text) or text
    assert "train_mlp: step 1: loss" in text and "EXPECTED: summed" in text, text
