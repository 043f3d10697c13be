#!/usr/bin/env python3
"""tools/dump_model.py on small modules defined here: a tied embedding, a ModuleList of
blocks, a frozen part; the output is exact (order, shapes, dtypes, requires_grad, ties),
and shardc reads it (validate + import to YAML). Needs /usr/bin/python3 with torch; without
torch the test prints why and exits 0 (CTest SKIP_RETURN_CODE is not used: a missing
optional dependency is not a failure of shardc).

Usage: test_dump_model.py --shardc BIN [--python /usr/bin/python3]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MODULES = '''
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self, d, device=None):
        super().__init__()
        self.norm = nn.LayerNorm(d, device=device)
        self.attn = nn.Linear(d, 3 * d, bias=False, device=device)
        self.proj = nn.Linear(d, d, device=device)

class Tiny(nn.Module):
    def __init__(self, vocab=100, d=16, layers=3, device=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, device=device)
        self.frozen = nn.Linear(d, d, bias=False, device=device, dtype=torch.bfloat16)
        self.frozen.requires_grad_(False)
        self.blocks = nn.ModuleList([Block(d, device=device) for _ in range(layers)])
        self.head = nn.Linear(d, vocab, bias=False, device=device)
        self.head.weight = self.embed.weight  # tied

def build(device=None):
    return Tiny(device=device)
'''

RECIPE = """format: shardc.recipe/v1
mesh:
  - {name: tp, size: 2}
rules:
  - {match: [embed.weight, head.weight], placements: {tp: Shard(0)}}
  - {match: "**", placements: {}}
tied: auto
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    args = ap.parse_args()
    probe = subprocess.run([args.python, "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        print(f"SKIP: {args.python} has no torch (apt-get install python3-torch); "
              "tools/dump_model.py not tested")
        return 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "tiny_modules.py").write_text(MODULES)
        out = tmp / "tiny.json"
        subprocess.run([args.python, str(REPO / "tools/dump_model.py"),
                        f"{tmp / 'tiny_modules.py'}:build", "-o", str(out), "--name", "tiny"],
                       check=True)
        inv = json.loads(out.read_text())
        want = [("embed.weight", [100, 16], "float32", True),
                ("frozen.weight", [16, 16], "bfloat16", False)]
        for i in range(3):
            want += [(f"blocks.{i}.norm.weight", [16], "float32", True),
                     (f"blocks.{i}.norm.bias", [16], "float32", True),
                     (f"blocks.{i}.attn.weight", [48, 16], "float32", True),
                     (f"blocks.{i}.proj.weight", [16, 16], "float32", True),
                     (f"blocks.{i}.proj.bias", [16], "float32", True)]
        want.append(("head.weight", [100, 16], "float32", True))
        got = [(p["name"], p["shape"], p["dtype"], p.get("requires_grad", True))
               for p in inv["params"]]
        if got != want:
            print(f"FAIL: params\n got  {got}\n want {want}", file=sys.stderr)
            return 1
        if inv["tied_weights"] != {"head.weight": "embed.weight"}:
            print(f"FAIL: tied_weights {inv['tied_weights']}", file=sys.stderr)
            return 1
        (tmp / "r.yaml").write_text(RECIPE)
        v = subprocess.run([args.shardc, "validate", str(out), str(tmp / "r.yaml")],
                           capture_output=True, text=True)
        if v.returncode != 0:
            print(f"FAIL: validate exited {v.returncode}:\n{v.stderr}", file=sys.stderr)
            return 1
        y = subprocess.run([args.python, str(REPO / "tools/dump_model.py"),
                            f"{tmp / 'tiny_modules.py'}:build", "-o", str(tmp / "tiny.yaml"),
                            "--name", "tiny", "--shardc", args.shardc])
        text = (tmp / "tiny.yaml").read_text() if y.returncode == 0 else ""
        if "repeat: {i: [0, 3]}" not in text or "requires_grad: false" not in text or \
                "[embed.weight, head.weight]" not in text:
            print(f"FAIL: YAML output:\n{text}", file=sys.stderr)
            return 1
    print("ok: dump_model.py: order, shapes, dtypes, requires_grad, ties; shardc reads it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
