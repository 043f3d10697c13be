"""Hugging Face models whose checkpoints store the routed experts pre-stacked, as shardc
model descriptions (docs/experts.md).

`hf_prestacked.py NAME` builds the model of tests/data/configs/NAME.config.json (the
published config.json, copied into the repo: no hub access) with transformers on the meta
device, dumps its parameters in named_parameters() order with tools/dump_model.py's
`inventory`, adds the config's attributes (for a multimodal config, the text model's:
its head, vocab and expert counts are the ones shardc's checks use) and the architecture,
writes tests/data/models/NAME.params.json(.gz) and, through `shardc import` ($SHARDC or
build/test/shardc), plans/<name lower>.model.yaml. The experts stay one [E, ...] tensor
per layer and projection, as the checkpoints and the transformers modules hold them:
gpt-oss (transformers/models/gpt_oss/modeling_gpt_oss.py GptOssExperts: gate_up_proj
[E, hidden, 2 x inter] interleaved gate|up, gate_up_proj_bias, down_proj, down_proj_bias)
and Llama-4 (transformers/models/llama4/modeling_llama4.py Llama4TextExperts:
gate_up_proj [E, hidden, 2 x inter] blocked gate|up, down_proj).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from model_files import load_dump_model, write_model_files

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "data" / "configs"

# NAME -> (transformers config class, model class, hf repo)
MODELS = {
    "gpt-oss-120b": ("GptOssConfig", "GptOssForCausalLM", "openai/gpt-oss-120b"),
    "Llama-4-Scout-17B-16E": ("Llama4Config", "Llama4ForConditionalGeneration",
                              "meta-llama/Llama-4-Scout-17B-16E"),
}

# shardc attribute <- config keys, first present wins (import's hf_config.cpp spellings).
ATTRIBUTES = {
    "num_attention_heads": ["num_attention_heads"],
    "num_key_value_heads": ["num_key_value_heads"],
    "head_dim": ["head_dim"],
    "hidden_size": ["hidden_size"],
    "intermediate_size": ["intermediate_size"],
    "num_hidden_layers": ["num_hidden_layers"],
    "vocab_size": ["vocab_size"],
    "num_experts": ["num_local_experts", "num_experts", "n_routed_experts"],
    "num_experts_per_tok": ["num_experts_per_tok"],
    "tie_word_embeddings": ["tie_word_embeddings"],
}


def config_dict(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / f"{name}.config.json").read_text())


def build_model(name: str) -> Any:
    """The transformers module of NAME on the meta device (bfloat16, as published)."""
    import torch
    import transformers

    config_cls, model_cls, _ = MODELS[name]
    raw = config_dict(name)
    config = getattr(transformers, config_cls)(**{k: v for k, v in raw.items()
                                                  if k not in ("architectures", "model_type")})
    with torch.device("meta"):
        model = getattr(transformers, model_cls)(config)
    return model.to(torch.bfloat16)


def attributes(name: str) -> dict[str, Any]:
    """The shardc attributes of NAME's config (the text model's for a multimodal one)."""
    raw = config_dict(name)
    text = raw.get("text_config", raw)
    out: dict[str, Any] = {}
    for key, spellings in ATTRIBUTES.items():
        for s in spellings:
            value = text.get(s, raw.get(s))
            if value is not None:
                out[key] = value
                break
    out["tie_word_embeddings"] = bool(raw.get("tie_word_embeddings", False))
    return out


def submodels(name: str, params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A multimodal config's towers (contract §3.2), as shardc import finds them: the
    `vision_config` / `audio_config` head counts and width, for the params under the tower's
    prefix (Llama-4's `vision_model`). Without them the vision tower's heads were checked
    against the text model's 40 / 8 heads (a tp 5 split cutting its 16 heads passed)."""
    raw = config_dict(name)
    out = []
    for key, prefix in (("vision_config", "vision_model"), ("audio_config", "audio_model")):
        sub = raw.get(key)
        if not isinstance(sub, dict) or not any(p["name"].startswith(prefix + ".") for p in params):
            continue
        attrs = {k: sub[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim",
                                     "hidden_size") if isinstance(sub.get(k), int)}
        out.append({"prefix": prefix, "config": key, "attributes": attrs})
    return out


def inventory(name: str) -> dict[str, Any]:
    _, model_cls, repo = MODELS[name]
    inv = load_dump_model().inventory(build_model(name), name)
    inv["hf_repo"] = repo
    inv["architecture"] = model_cls
    inv["attributes"] = attributes(name)
    if subs := submodels(name, inv["params"]):
        inv["submodels"] = subs
    inv["param_count"] = sum(math.prod(p["shape"]) for p in inv["params"])
    return inv


def main(argv: list[str]) -> int:
    (name,) = argv
    inv = inventory(name)
    src = REPO / "tests" / "data" / "models" / f"{name}.params.json"
    out = REPO / "plans" / f"{name.lower()}.model.yaml"
    note = [f"# transformers' {MODELS[name][1]} built from tests/data/configs/{name}.config.json "
            "(the published", "# config.json) on the meta device, dumped by "
            "tools/dump_model.py's inventory (named_parameters() order); the",
            "# routed experts are pre-stacked [E, ...] tensors, as the checkpoint stores them. "
            f"Regenerate: .venv/bin/python tests/torch/hf_prestacked.py {name}"]
    return write_model_files(inv, src, out, note)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
