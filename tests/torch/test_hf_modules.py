"""Hugging Face modules are the truth for names, order, shapes, dtypes and ties.

For every architecture in tests/data/models: the hub checkpoint layout (sparse
safetensors written from the real inventory and config.json) goes through
`shardc import`; `AutoModelForCausalLM.from_config` on the meta device gives
`named_parameters()`; transformers' own loader mapping (hf_truth.py) maps every
checkpoint key to its module key. Then, exactly:

* the module params in the order of their first checkpoint key in shardc's import
  equal `named_parameters()` (FSDP2 unit offsets follow this order);
* every 1:1 key has the module's shape; dtypes are the checkpoint's;
* shardc's ties equal the module's shared parameters;
* checkpoint keys that land on module *buffers* are named;
* every module buffer (`named_buffers()` on the meta device) written into the checkpoint, as
  older checkpoints store them (rotary `inv_freq`, Gemma's `embed_scale`), is left out by
  import or frozen: never planned as a trainable param (docs/import.md).

Where transformers 5 and shardc disagree, the disagreement is pinned in KNOWN below with
its reason, so that it cannot grow or vanish unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import transformers

import hf_truth

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import checkpoint_util as cu  # noqa: E402

ARCHS = ["gpt2", "Llama-3.1-8B", "Llama-3.1-70B", "Llama-3.1-405B", "Qwen2.5-0.5B",
         "gemma-2-2b", "Mixtral-8x7B-v0.1", "Qwen3-30B-A3B", "Qwen3-235B-A22B", "DeepSeek-V3"]

# Disagreements between transformers 5.24's modules and shardc, each with its reason
# (the issue note lists them). order: (module param shardc puts first, the one HF puts
# first) at the first difference; buffers: checkpoint keys that are module buffers but
# that shardc imports as trainable params; dtype: module params whose dtype differs from
# the checkpoint's (HF upcasts them when loading).
KNOWN: dict[str, dict[str, Any]] = {
    # DeepseekV3TopkRouter: the router weight is float32 in the module
    # (_keep_in_fp32_modules_strict), bfloat16 in the checkpoint; shardc plans the
    # checkpoint's dtype. (Its e_score_correction_bias is a buffer: with --transformers 5
    # import freezes it; without, it is trainable, as DeepSeek's own modeling_deepseek.py
    # and the shipped inventory have it: test_transformers_4_buffers.)
    "DeepSeek-V3": {"dtype": {"mlp.gate.weight": ("bfloat16", "float32")}},
}

# The installed transformers' major version: `shardc import --transformers` follows its
# modules' registration order.
TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])

# Without --transformers 5 import follows transformers 4, whose Qwen3MoeSparseMoeBlock
# registers `gate` before `experts` (5: `experts` first): (shardc's, transformers 5's) param
# at the first difference.
ORDER_4X = {
    "Qwen3-30B-A3B": ("model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.gate_up_proj"),
}


def imported(shardc: str, name: str, tmp: Path, extra: list[dict[str, Any]] | None = None,
             transformers_major: int | None = TRANSFORMERS_MAJOR) -> dict[str, Any]:
    """`shardc import --format json` of the architecture's sparse hub checkpoint, with the
    `extra` tensors ({name, shape, dtype}) stored beside the inventory's."""
    inv, cfg = cu.load_inventory(name), cu.load_config(name)
    if extra:
        inv = dict(inv, params=list(inv["params"]) + extra)
    cu.write_checkpoint(inv, cfg, tmp / "ckpt")
    version = [] if transformers_major is None else ["--transformers", str(transformers_major)]
    res = subprocess.run([shardc, "import", str(tmp / "ckpt"), "--format", "json", *version],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize("name", ARCHS)
def test_hf_module_agrees(shardc: str, tmp_path: Path, name: str) -> None:
    hf = hf_truth.hf_module(cu.load_config(name))
    stored = {p["name"] for p in cu.load_inventory(name)["params"]}
    buffers = [{"name": n, "shape": list(b.shape), "dtype": str(b.dtype).removeprefix("torch.")}
               for n, b in hf.model.named_buffers() if n not in stored]
    imp = imported(shardc, name, tmp_path, buffers)
    planned = {p["name"]: p for p in imp["params"]}
    trainable_buffers = [b["name"] for b in buffers
                         if b["name"] in planned and planned[b["name"]].get("requires_grad", True)]
    assert not trainable_buffers, f"module buffers imported as trainable params: {trainable_buffers}"
    imp = dict(imp, params=[p for p in imp["params"] if p["name"] not in {b["name"] for b in buffers}])
    known = KNOWN.get(name, {})
    tied = imp.get("tied_weights") or {}
    assert tied == hf.ties, f"ties: shardc {tied}, transformers {hf.ties}"
    keys = [p["name"] for p in imp["params"] if p["name"] not in tied]
    mapping = hf_truth.checkpoint_to_module_keys(hf, keys)
    hf_names = [n for n, _, _ in hf.params]
    hf_shape = {n: (s, d) for n, s, d in hf.params}
    order: list[str] = []
    for k in keys:
        target = mapping[k][0]
        if target not in order:
            order.append(target)
    unknown = [t for t in order if t not in hf_shape and t not in hf.buffers]
    assert not unknown, f"checkpoint keys with no module param or buffer: {unknown[:5]}"
    on_buffers = [k for k in keys if mapping[k][0] in hf.buffers
                  and planned[k].get("requires_grad", True)]
    assert len(on_buffers) == known.get("buffers", 0), (
        f"checkpoint keys that are module buffers (shardc plans them as params): "
        f"{on_buffers[:5]} ({len(on_buffers)})")
    ours = [t for t in order if t in hf_shape]
    assert set(ours) == set(hf_names), f"params missing: {set(hf_names) - set(ours)}"
    if ours != hf_names:
        i = next(i for i, (a, b) in enumerate(zip(ours, hf_names)) if a != b)
        assert known.get("order") == (ours[i], hf_names[i]), (
            f"module order differs at {i}: shardc {ours[i]}, transformers {hf_names[i]}")
    else:
        assert "order" not in known, "the known order difference is gone: update KNOWN"
    by_name = {p["name"]: p for p in imp["params"]}
    dtype_known = known.get("dtype", {})
    for k in keys:
        target, converter = mapping[k]
        if target not in hf_shape:
            continue
        shape, dtype = hf_shape[target]
        if converter is None:
            assert by_name[k]["shape"] == shape, f"{k}: shardc {by_name[k]['shape']}, HF {shape}"
        if by_name[k]["dtype"] != dtype:
            suffix = next((s for s in dtype_known if target.endswith(s)), None)
            assert suffix and dtype_known[suffix] == (by_name[k]["dtype"], dtype), (
                f"{k}: dtype shardc {by_name[k]['dtype']}, module {dtype}")


@pytest.mark.parametrize("name", sorted(ORDER_4X))
def test_transformers_4_order(shardc: str, tmp_path: Path, name: str) -> None:
    """Without `--transformers 5` import follows transformers 4's registration order: against
    transformers 5's module the first difference is the known one (with it, none: above)."""
    assert TRANSFORMERS_MAJOR == 5, "the pinned transformers is 5.x (tools/python/requirements.txt)"
    hf = hf_truth.hf_module(cu.load_config(name))
    imp = imported(shardc, name, tmp_path, transformers_major=None)
    tied = imp.get("tied_weights") or {}
    keys = [p["name"] for p in imp["params"] if p["name"] not in tied]
    mapping = hf_truth.checkpoint_to_module_keys(hf, keys)
    hf_names = [n for n, _, _ in hf.params]
    order: list[str] = []
    for k in keys:
        if mapping[k][0] in hf_names and mapping[k][0] not in order:
            order.append(mapping[k][0])
    assert order != hf_names, "transformers 4's order equals 5's: update ORDER_4X"
    i = next(i for i, (a, b) in enumerate(zip(order, hf_names)) if a != b)
    assert (order[i], hf_names[i]) == ORDER_4X[name]


def test_transformers_4_buffers(shardc: str, tmp_path: Path) -> None:
    """DeepSeek-V3's e_score_correction_bias: frozen with and without --transformers 5
    (transformers 5: an nn.Buffer; DeepSeek's own modeling: a Parameter no gradient reaches,
    used only to pick the top-k experts). Trainable, its float32 in a bfloat16 FSDP unit is
    what FSDP2 refuses at the first forward (trial E 1)."""
    for major, trainable in ((None, False), (5, False)):
        imp = imported(shardc, "DeepSeek-V3", tmp_path / str(major), transformers_major=major)
        biases = [p for p in imp["params"] if p["name"].endswith("e_score_correction_bias")]
        assert len(biases) == 58
        assert all(p.get("requires_grad", True) == trainable for p in biases), major


@pytest.mark.parametrize("name", ["gpt2", "Qwen2.5-0.5B"])
def test_dump_model_config(shardc: str, tmp_path: Path, name: str) -> None:
    """tools/dump_model.py --config: named_parameters() order, the attributes `shardc import`
    writes for the same config, `module_order: module`; its model validates without
    W-MODULE-ORDER (issue 27 item 8)."""
    cfg = cu.load_config(name)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "dumped.json"
    res = subprocess.run([sys.executable, str(REPO / "tools" / "dump_model.py"), "--config",
                          str(tmp_path / "config.json"), "-o", str(out), "--shardc", shardc],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    dumped = json.loads(out.read_text())
    hf = hf_truth.hf_module(cfg)
    tied = dumped["tied_weights"]
    assert [p["name"] for p in dumped["params"] if p["name"] not in tied] == [n for n, _, _ in hf.params]
    assert tied == hf.ties
    assert dumped["module_order"] == "module"
    assert dumped["attributes"] == imported(shardc, name, tmp_path)["attributes"]
    yaml_path = tmp_path / "dumped.model.yaml"
    res = subprocess.run([shardc, "import", str(out), "-o", str(yaml_path)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "\nmodule_order: module\n" in yaml_path.read_text()
    recipe = tmp_path / "r.yaml"
    recipe.write_text("format: shardc.recipe/v1\nmesh:\n  - {name: dp, size: 2}\nrules:\n"
                      "  - {match: \"**\", placements: {}}\n")
    res = subprocess.run([shardc, "validate", str(yaml_path), str(recipe), "--strict",
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    codes = [d["code"] for d in json.loads(res.stdout or "[]")]
    assert "W-MODULE-ORDER" not in codes, res.stdout
