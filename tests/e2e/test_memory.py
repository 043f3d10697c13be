#!/usr/bin/env python3
"""`shardc memory`, `validate --budget` and `inspect`'s memory block through the real CLI.

    test_memory.py --shardc BIN

Checks (shipped Llama-3.1-8B dp 8 x tp 8 and a tiny model written here):
  * the table prints every kind per stage, the peak rank and "not counted: activations"
  * --format json: every rank listed with --ranks equals `inspect --format json`'s `memory`
    (the rank file), and totals follow total = states + max(fsdp2, muon)
  * `validate --budget 80GiB` exits 0; `--budget 5GiB` exits 1 with E-BUDGET naming the
    worst ranks and a hint; `memory --budget 5GiB` prints the report and exits 1
  * the recipe's `training.budget` does the same, located at the budget value; `--budget`
    overrides it; a malformed `--budget` is a usage error (exit 2); a decimal budget
    (`80GB`) prints in GiB like the table (not "78125000 KiB")
  * `training:` changes the figures exactly: master_weights float32 adds 4 bytes per local
    element and moves the two AdamW moments to float32
  * `inspect --rank R` shows the rank's breakdown
Exit status: 0 pass, 1 failure. Stdlib only.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "plans" / "llama-3.1-8b.model.yaml"
RECIPE = ROOT / "plans" / "llama-3.1-8b-dp8-tp8.recipe.yaml"
KINDS = ["params", "grads", "master_weights", "optimizer_state", "fsdp2_allgather",
         "muon_allgather"]

TINY_MODEL = """format: shardc.model/v1
name: tiny
dtype: bfloat16
params:
  - {name: w1, shape: [1024, 256]}
  - {name: b1, shape: [1024]}
  - {name: w2, shape: [256, 1024]}
"""
TINY_RECIPE = """format: shardc.recipe/v1
mesh:
  - {name: dp_shard, size: 4}
rules:
  - match: "**"
    placements: {}
fsdp: {shard: dp_shard}
"""


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.count = 0

    def check(self, ok: bool, what: str) -> None:
        self.count += 1
        if not ok:
            self.failed.append(what)
            print("FAIL " + what, flush=True)


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    s = ap.parse_args().shardc
    c = Checks()

    p = run([s, "memory", MODEL, RECIPE])
    c.check(p.returncode == 0, f"memory exits 0 (got {p.returncode}: {p.stderr})")
    for k in KINDS + ["total", "peak:", "not counted: activations"]:
        c.check(k in p.stdout, f"table mentions {k!r}")

    p = run([s, "memory", MODEL, RECIPE, "--format", "json", "--ranks", "0,17,63"])
    c.check(p.returncode == 0, f"memory --format json exits 0 ({p.stderr})")
    m = json.loads(p.stdout)
    c.check(m["format"] == "shardc.memory/v1" and m["fits"] is None, "json header, fits null")
    c.check([e["rank"] for e in m["ranks"]] == [0, 17, 63], "--ranks lists the ranks asked for")
    for e in m["ranks"]:
        b = e["bytes"]
        states = b["params"] + b["grads"] + b["master_weights"] + b["optimizer_state"]
        c.check(b["total"] == states + max(b["fsdp2_allgather"], b["muon_allgather"]),
                f"rank {e['rank']}: total = states + max(transients)")
        p2 = run([s, "inspect", MODEL, RECIPE, "--rank", e["rank"], "--format", "json"])
        c.check(json.loads(p2.stdout).get("memory") == b,
                f"rank {e['rank']}: rank file memory == shardc memory")
    p = run([s, "inspect", MODEL, RECIPE, "--rank", "17"])
    c.check("memory (optimizer adamw" in p.stdout and "optimizer_state" in p.stdout,
            "inspect --rank 17 shows the memory breakdown")
    total17 = m["ranks"][1]["bytes"]["total"]
    c.check(f"({total17})" in p.stdout, "inspect shows the same total in bytes")
    # Trial A 3.5: usage errors after planning are whole diagnostics (hint, summary line).
    p = run([s, "inspect", MODEL, RECIPE, "--rank", "64"])
    c.check(p.returncode == 2 and "error[E-USAGE]: --rank 64 is out of range" in p.stderr
            and "hint: give a rank below 64" in p.stderr and "1 error, 0 warnings" in p.stderr,
            f"inspect --rank 64: E-USAGE with a hint and the summary line ({p.stderr})")

    p = run([s, "validate", MODEL, RECIPE, "--budget", "80GiB"])
    c.check(p.returncode == 0, f"validate --budget 80GiB exits 0 ({p.stderr})")
    p = run([s, "validate", MODEL, RECIPE, "--budget", "5GiB"])
    c.check(p.returncode == 1 and "error[E-BUDGET]" in p.stderr, "validate --budget 5GiB: E-BUDGET")
    c.check("64 of 64 ranks are over: 0-63" in p.stderr and "hint:" in p.stderr,
            f"E-BUDGET names the ranks over and hints ({p.stderr})")
    p = run([s, "validate", MODEL, RECIPE, "--budget", "5GiB", "--format", "json"])
    diags = json.loads(p.stdout)
    c.check(p.returncode == 1 and [d["code"] for d in diags] == ["E-BUDGET"],
            "validate --format json lists E-BUDGET")
    p = run([s, "memory", MODEL, RECIPE, "--budget", "5GiB"])
    c.check(p.returncode == 1 and "exceeded by" in p.stdout and "E-BUDGET" in p.stderr,
            "memory --budget 5GiB prints the report and exits 1")
    p = run([s, "memory", MODEL, RECIPE, "--budget", "5GiB", "--format", "json"])
    c.check(p.returncode == 1 and json.loads(p.stdout)["fits"] is False, "json fits false")
    # A decimal budget (80 GB, the H100 preset's HBM, what `search --emit-recipe` writes)
    # reads in the table's unit: it printed "budget 78125000 KiB".
    p = run([s, "memory", MODEL, RECIPE, "--budget", "80GB"])
    c.check(p.returncode == 0 and "\nbudget 74.51 GiB: fits, headroom " in p.stdout
            and "KiB" not in p.stdout, f"memory --budget 80GB prints 74.51 GiB ({p.stdout[-300:]})")
    p = run([s, "validate", MODEL, RECIPE, "--budget", "5GB"])
    c.check(p.returncode == 1 and "over the budget of 4.66 GiB by " in p.stderr,
            f"E-BUDGET states a decimal budget in GiB ({p.stderr[:300]})")
    for bad in ["lots", "-1GiB", "5Gb!"]:
        p = run([s, "validate", MODEL, RECIPE, "--budget", bad])
        c.check(p.returncode == 2, f"--budget {bad!r} is a usage error (exit {p.returncode})")

    with tempfile.TemporaryDirectory(prefix="shardc-memory-") as tmp_str:
        tmp = Path(tmp_str)
        model = tmp / "tiny.model.yaml"
        model.write_text(TINY_MODEL)
        plain = tmp / "plain.recipe.yaml"
        plain.write_text(TINY_RECIPE)
        mixed = tmp / "mixed.recipe.yaml"
        mixed.write_text(TINY_RECIPE + "training:\n  optimizer: adamw\n"
                         "  master_weights: float32\n  budget: 1KiB\n")
        # Per rank: FSDP 4 on dim 0 -> w1 [256, 256], b1 [256], w2 [64, 1024]: n = 131,328.
        n = 256 * 256 + 256 + 64 * 1024
        r0 = json.loads(run([s, "memory", model, plain, "--format", "json", "--ranks", "0"])
                        .stdout)["ranks"][0]["bytes"]
        c.check(r0["params"] == 2 * n and r0["optimizer_state"] == 4 * n,
                f"defaults: bf16 params and two bf16 moments ({r0})")
        p = run([s, "memory", model, mixed, "--format", "json", "--ranks", "0", "--budget",
                 "1GiB"])
        c.check(p.returncode == 0, "--budget overrides the recipe's budget")
        r1 = json.loads(p.stdout)["ranks"][0]["bytes"]
        c.check(r1["master_weights"] == 4 * n and r1["optimizer_state"] == 8 * n,
                f"master_weights float32: +4 B/element, fp32 moments ({r1})")
        p = run([s, "validate", model, mixed, "--format", "json"])
        diags = json.loads(p.stdout)
        c.check(p.returncode == 1 and diags and diags[0]["code"] == "E-BUDGET"
                and diags[0]["line"] == 11 and diags[0]["column"] == 11,
                f"training.budget: E-BUDGET at the budget value ({p.stdout})")

    if c.failed:
        print(f"\n{len(c.failed)} of {c.count} checks failed")
        return 1
    print(f"\nall {c.count} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
