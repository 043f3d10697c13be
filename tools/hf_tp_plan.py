#!/usr/bin/env python3
"""Write transformers' tensor-parallel plan of a checkpoint's architecture for
`shardc recipe --from-hf-tp-plan`.

Usage:
  hf_tp_plan.py CHECKPOINT_OR_CONFIG [-o plan.json]

CHECKPOINT_OR_CONFIG is a checkpoint directory (its config.json is read) or a config.json.
The model is built with `AutoModelForCausalLM.from_config` on the meta device (no weights,
no hub) and its `tp_plan` (the class's `_tp_plan` plus the config's `base_model_tp_plan`
with the base-model prefix, as transformers applies them) is written as
`{"format": "shardc.hf-tp-plan/v1", "architecture", "transformers", "tp_plan"}`.
Runs on the project's environment (tools/venv)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def tp_plan_of(config: dict[str, Any]) -> dict[str, Any]:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    conf = AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    return {"format": "shardc.hf-tp-plan/v1", "architecture": type(model).__name__,
            "transformers": transformers.__version__, "tp_plan": dict(model.tp_plan or {})}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="checkpoint directory or config.json")
    ap.add_argument("-o", "--out", help="output file (default: stdout)")
    args = ap.parse_args(argv)
    path = Path(args.path)
    cfg_path = path / "config.json" if path.is_dir() else path
    if not cfg_path.is_file():
        print(f"hf_tp_plan.py: {cfg_path} is not a file", file=sys.stderr)
        return 2
    config = json.loads(cfg_path.read_text())
    if "model_type" not in config:
        print(f"hf_tp_plan.py: {cfg_path} has no model_type", file=sys.stderr)
        return 2
    text = json.dumps(tp_plan_of(config), indent=2) + "\n"
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, args.out)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
