#!/usr/bin/env python3
"""`shardc cost` end to end (CTest cost/cli): the JSON validates against
schemas/cost.schema.json for shipped plans with a training shape (DDP + TP, HSDP + TP,
MoE with EP on a pipeline), its statistics agree with its classes (min / max over the
ranks, the peak rank's class), the table prints the same peak, and a recipe without a
training shape is E-TRAINING, exit 2.
Usage: test_cost.py --shardc BIN
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "plans"
SHAPE = "training:\n  seq_len: 4096\n  sequence_parallel: true\n  ranks_per_node: 8\n"
CASES = [("llama-3.1-8b", "llama-3.1-8b-dp8-tp8"), ("llama-3.1-70b", "llama-3.1-70b-hsdp"),
         ("mixtral-8x7b", "mixtral-8x7b-ep8-tp8"),
         # torchtitan's own modules: their model files carry the sizes `cost` reads
         # (intermediate_size, MLA and MoE widths; tests/torch/titan.py `attributes`).
         ("torchtitan-llama3-8b", "torchtitan-llama3-8b-fsdp-tp"),
         ("torchtitan-deepseek_v3-16b", "torchtitan-deepseek_v3-16b-fsdp-tp-ep")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    args = ap.parse_args()
    schema = json.loads((ROOT / "schemas" / "cost.schema.json").read_text())
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, recipe in CASES:
            path = Path(tmp) / f"{recipe}.yaml"
            path.write_text((PLANS / f"{recipe}.recipe.yaml").read_text() + SHAPE)
            cmd = [args.shardc, "cost", str(PLANS / f"{model}.model.yaml"), str(path), "--quiet"]
            r = subprocess.run(cmd + ["--format", "json"], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{recipe}: exit {r.returncode}: {r.stderr[-500:]}")
                continue
            doc = json.loads(r.stdout)
            try:
                jsonschema.validate(doc, schema)
            except jsonschema.ValidationError as exc:
                failures.append(f"{recipe}: schema: {exc.message}")
            totals = [c["bytes"] for c in doc["classes"]]
            if sum(c["count"] for c in doc["classes"]) != doc["world_size"]:
                failures.append(f"{recipe}: classes do not cover the world")
            if doc["per_step"]["total"]["max"] != max(totals) or \
                    doc["per_step"]["total"]["min"] != min(totals):
                failures.append(f"{recipe}: per_step.total disagrees with the classes")
            if doc["peak"]["bytes"] != max(totals):
                failures.append(f"{recipe}: peak != the largest class")
            for c in doc["classes"]:
                if sum(t["bytes"] for t in c["terms"]) != c["bytes"]:
                    failures.append(f"{recipe}: class {c['ranks']}: terms do not sum")
            table = subprocess.run(cmd, capture_output=True, text=True)
            gib = f"{doc['peak']['bytes'] / 2**30:.2f} GiB"
            if table.returncode != 0 or f"peak: {gib}" not in table.stdout:
                failures.append(f"{recipe}: the table's peak is not {gib}")
            print(f"ok   {recipe}: {len(doc['classes'])} classes, peak {gib}")
        bare = subprocess.run([args.shardc, "cost", str(PLANS / "llama-3.1-8b.model.yaml"),
                               str(PLANS / "llama-3.1-8b-dp8-tp8.recipe.yaml")],
                              capture_output=True, text=True)
        if bare.returncode != 2 or "E-TRAINING" not in bare.stderr:
            failures.append(f"no training shape: exit {bare.returncode}, {bare.stderr[-300:]}")
        # ZeRO-2 keeps only its grad shard: it reduce-scatters every micro-batch (DeepSpeed
        # engine.allreduce_gradients), ZeRO-1 once at the accumulation boundary; both
        # all-gather the updated params once (a fresh-user finding: ZeRO-2 counted once).
        sent = {}
        for stage in (1, 2):
            path = Path(tmp) / f"zero{stage}.yaml"
            path.write_text("format: shardc.recipe/v1\nmesh:\n  - {name: dp, size: 8}\n"
                            "rules:\n  - {match: \"**\", placements: {}}\ntraining:\n"
                            f"  zero_optimization: {{stage: {stage}}}\n  seq_len: 4096\n"
                            "  gradient_accumulation_steps: 4\n")
            r = subprocess.run([args.shardc, "cost", str(PLANS / "llama-3.1-8b.model.yaml"),
                                str(path), "--format", "json"], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"zero {stage}: exit {r.returncode}: {r.stderr[-300:]}")
                continue
            terms = json.loads(r.stdout)["classes"][0]["terms"]
            sent[stage] = {t["collective"]: t["bytes"] for t in terms if t["role"] == "zero"}
        if len(sent) == 2 and not (
                sent[2]["reduce_scatter"] == 4 * sent[1]["reduce_scatter"] > 0
                and sent[2]["all_gather"] == sent[1]["all_gather"] > 0):
            failures.append(f"ZeRO-2 reduce-scatters per micro-batch (4), ZeRO-1 once: {sent}")
        else:
            print(f"ok   ZeRO-2 reduce-scatters 4 micro-batches, ZeRO-1 once: {sent}")
    for f in failures:
        print("FAIL " + f)
    print("all cost checks passed" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
