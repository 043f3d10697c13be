#!/usr/bin/env python3
"""Write transformers' tensor-parallel plan of a checkpoint's architecture for
`shardc recipe --from-hf-tp-plan`.

Usage:
  hf_tp_plan.py CHECKPOINT_OR_CONFIG [-o plan.json]

CHECKPOINT_OR_CONFIG is a checkpoint directory (its config.json is read) or a config.json.
The model is built with `AutoModelForCausalLM.from_config` on the meta device (no weights,
no hub) and its `tp_plan` (the class's `_tp_plan` plus the config's `base_model_tp_plan`
with the base-model prefix, as transformers applies them) and `ep_plan` (the same of
`base_model_ep_plan`: `grouped_gemm`, `ep_dispatch_experts`; empty when the architecture has
none) are written as `{"format": "shardc.hf-tp-plan/v1", "architecture", "transformers",
"tp_plan", "ep_plan"}`.

Given a checkpoint directory, the dump also has `sources`: every param of transformers'
module that its loader does not read under its own name, with the checkpoint tensors it
is made of, found by transformers' own key conversion (`get_model_conversion_mapping`,
`rename_source_key`, the checkpoint keys in `dot_natural_key` order, as
`convert_and_load_state_dict_in_model` collects them):
`{param: {"shape": [...], "operations": [{"op": "MergeModulelist", "dim": 0}, ...],
"parts": [[checkpoint keys of source pattern 1], ...]}}` (Mixtral's
`experts.gate_up_proj` is `MergeModulelist(dim=0)` of each of `experts.*.w1.weight` and
`experts.*.w3.weight`, then `Concatenate(dim=1)`; a pure renaming has no operation).
Runs on the project's environment (tools/venv)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def checkpoint_keys(checkpoint: Path) -> list[str]:
    """The tensor names of a checkpoint directory's safetensors files (headers only)."""
    from safetensors import safe_open

    keys: list[str] = []
    for f in sorted(checkpoint.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as handle:
            keys.extend(handle.keys())
    return keys


def conversion_sources(model: Any, keys: list[str]) -> dict[str, Any]:
    """transformers' loader's view of the checkpoint keys: each param it builds from
    tensors of other names, the operations and the keys per source pattern, in the
    order it collects them (transformers/core_model_loading.py)."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import (WeightConverter, WeightRenaming,
                                                 dot_natural_key, rename_source_key)

    mapping = get_model_conversion_mapping(model)
    renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
    converters = [m for m in mapping if isinstance(m, WeightConverter)]
    meta = model.state_dict()
    params = dict(model.named_parameters())
    found: dict[str, tuple[Any, dict[str, list[str]]]] = {}
    for key in sorted(keys, key=dot_natural_key):
        renamed, pattern = rename_source_key(key, renamings, converters,
                                             model.base_model_prefix, meta)
        if renamed not in meta and key in meta:  # as the loader: keep the key's own name
            renamed, pattern = rename_source_key(key, [], [], model.base_model_prefix, meta)
        if renamed not in params:
            continue
        if pattern is None:
            if renamed != key:
                found[renamed] = (None, {"": [key]})
            continue
        converter = next(c for c in converters if pattern in c.source_patterns)
        found.setdefault(renamed, (converter, {p: [] for p in converter.source_patterns}))
        found[renamed][1][pattern].append(key)
    out: dict[str, Any] = {}
    for name, (converter, parts) in found.items():
        ops = [] if converter is None else [
            {"op": type(op).__name__, "dim": getattr(op, "dim", None)} for op in converter.operations]
        out[name] = {"shape": list(params[name].shape), "operations": ops,
                     "parts": [keys_of for keys_of in parts.values() if keys_of]}
    return out


def tp_plan_of(config: dict[str, Any], checkpoint: Path | None = None) -> dict[str, Any]:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    conf = AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    out = {"format": "shardc.hf-tp-plan/v1", "architecture": type(model).__name__,
           "transformers": transformers.__version__, "tp_plan": dict(model.tp_plan or {}),
           "ep_plan": dict(getattr(model, "ep_plan", None) or {})}
    if checkpoint is not None:
        out["sources"] = conversion_sources(model, checkpoint_keys(checkpoint))
    return out


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
    text = json.dumps(tp_plan_of(config, path if path.is_dir() else None), indent=2) + "\n"
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
