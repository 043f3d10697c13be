"""Hugging Face modules are the truth for names, order and ties.

`hf_module(config)` builds `AutoModelForCausalLM.from_config` on the meta device;
`checkpoint_to_module_keys` maps checkpoint keys to the module's keys with transformers'
own loader mapping (`get_model_conversion_mapping` + `core_model_loading.rename_source_key`,
the function `from_pretrained` uses: renamings, then at most one converter such as the
MoE `MergeModulelist` that stacks per-expert tensors into one 3-D parameter).
Private transformers APIs used here and nowhere else (transformers pinned in
tools/python/requirements.txt)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.conversion_mapping import get_model_conversion_mapping
from transformers.core_model_loading import WeightConverter, rename_source_key


@dataclasses.dataclass(frozen=True)
class HfModule:
    params: list[tuple[str, list[int], str]]  # named_parameters order, ties removed
    ties: dict[str, str]  # alias FQN -> FQN of the first registration
    buffers: set[str]
    model: Any


def hf_module(config: dict[str, Any]) -> HfModule:
    cfg = dict(config)
    kwargs = {k: v for k, v in cfg.items() if k != "model_type"}
    conf = AutoConfig.for_model(cfg["model_type"], **kwargs)
    dtype = getattr(torch, str(cfg.get("torch_dtype") or cfg.get("dtype") or "float32"))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf, dtype=dtype)
    seen: dict[int, str] = {}
    params: list[tuple[str, list[int], str]] = []
    ties: dict[str, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            ties[name] = seen[id(p)]
            continue
        seen[id(p)] = name
        params.append((name, list(p.shape), str(p.dtype).removeprefix("torch.")))
    buffers = {n for n, _ in model.named_buffers()}
    return HfModule(params, ties, buffers, model)


def checkpoint_to_module_keys(hf: HfModule, keys: list[str]) -> dict[str, tuple[str, str | None]]:
    """checkpoint key -> (module key, converter source pattern or None)."""
    model = hf.model
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if not isinstance(t, WeightConverter)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    meta_state = model.state_dict()
    prefix = getattr(model, "base_model_prefix", None)
    return {k: rename_source_key(k, renamings, converters, prefix, meta_state) for k in keys}
