"""The rank file's local attributes, applied to Hugging Face modules (issue 28 item 5).

Each test runs every rank of a plan in one process, one after the other (no process
group): the rank's module is built from the config with its local shards read from
the checkpoint by the rank file, `apply_local_attributes` tells it what it holds, and
the ranks' partial outputs (row-parallel o_proj, EP experts, vocab-parallel
embedding) summed equal the unsharded module's output. Without the attributes the
same forward fails or differs, so the test shows they are needed:

* GQA with kv < tp (transformers LlamaAttention, 8 query heads, 2 KV heads, tp 4, k/v
  replicated): num_key_value_groups and the k/v narrowing to the attended KV head;
* uneven EP (Qwen3MoeExperts, 6 experts over 4 ranks: 2, 2, 2, 0): num_experts and
  the global-to-local expert id routing;
* padded vocab (nn.Embedding, 37 tokens over tp 4 with pad 8: 16, 16, 5 + 11 padding,
  0 + 16 padding): the token range.
"""

from __future__ import annotations

import json
import os
from typing import Any

import harness
import numpy as np
import pytest
import torch

import shardc_runtime as sr
from shardc_runtime.load import read_param
from shardc_runtime.torch import apply_local_attributes, to_torch


def _local(info: sr.ParamInfo, ck: sr.Checkpoint) -> torch.Tensor:
    """The rank's real rows of a param, padded with zeros to its padded shape."""
    real = to_torch(np.ascontiguousarray(
        read_param(info, ck)[tuple(slice(0, n) for n in info.local_shape)]), info.dtype)
    out = torch.zeros(info.padded_shape, dtype=real.dtype)
    out[tuple(slice(0, n) for n in info.local_shape)] = real
    return out


def _holder(fqn: str, leaf: torch.nn.Module) -> torch.nn.Module:
    """A module tree that has `leaf` at `fqn`."""
    root = node = torch.nn.Module()
    *parents, last = fqn.split(".")
    for part in parents:
        child = torch.nn.Module()
        node.add_module(part, child)
        node = child
    node.add_module(last, leaf)
    return root


def _write_checkpoint(path: str, tensors: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in tensors.items()}, path)


def test_gqa_kv_replicated(shardc: str, tmp_path: Any) -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(vocab_size=37, hidden_size=32, intermediate_size=24,
                         num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=2,
                         head_dim=4, max_position_embeddings=64, tie_word_embeddings=False)
    torch.manual_seed(0)
    full = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    ckdir = str(tmp_path / "ck")
    full.save_pretrained(ckdir)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("format: shardc.recipe/v1\nmesh: [{name: tp, size: 4}]\nrules:\n"
                      "  - {match: '**.q_proj.weight', placements: {tp: Shard(0)}}\n"
                      "  - {match: '**.o_proj.weight', placements: {tp: Shard(1)}}\n"
                      "  - {match: '**', placements: {}}\n")
    out = sr.OutDir(harness.compile_plan(shardc, ckdir, str(recipe), str(tmp_path / "out")))
    ck = sr.Checkpoint(os.path.join(ckdir, "model.safetensors"))
    hidden = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(1))
    positions = torch.arange(5)[None].expand(2, 5)
    rotary = full.model.rotary_emb
    cos_sin = rotary(hidden, positions)
    mask = torch.full((5, 5), float("-inf")).triu(1)[None, None].expand(2, 1, 5, 5)
    want = full.model.layers[0].self_attn(hidden, cos_sin, mask)[0]
    total = torch.zeros_like(want)
    prefix = "model.layers.0.self_attn"
    for rank in range(4):
        me = out.rank(rank)
        heads = sr.head_counts(me)[prefix]
        assert heads.query == range(2 * rank, 2 * rank + 2), heads
        assert heads.key_value == range(0, 2) and heads.kv_used == range(rank // 2, rank // 2 + 1)
        local = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
        with torch.no_grad():
            for name, param in local.named_parameters():
                param.data = _local(me.params[name], ck)
        attn = local.model.layers[0].self_attn
        with pytest.raises(RuntimeError):  # 2 query heads, 2 KV heads repeated 4 times: 8
            attn(hidden, cos_sin, mask)
        told = apply_local_attributes(local, me)
        assert any("num_key_value_groups 2" in line for line in told), told
        total += attn(hidden, cos_sin, mask)[0]
    err = ((total - want).norm() / want.norm()).item()
    assert err < 1e-5, f"sum of the ranks' attention outputs differs (relative error {err})"


def _moe_plan(shardc: str, tmp_path: Any) -> tuple[sr.OutDir, str, Any, Any]:
    """6 pre-stacked experts (Qwen3MoeExperts' gate_up_proj / down_proj) over ep 4."""
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    config = Qwen3MoeConfig(hidden_size=8, moe_intermediate_size=4, num_experts=6,
                            num_experts_per_tok=2, num_attention_heads=2, num_key_value_heads=1)
    torch.manual_seed(0)
    experts = Qwen3MoeExperts(config)
    with torch.no_grad():
        for p in experts.parameters():
            p.normal_()
    prefix = "model.layers.0.mlp.experts"
    tensors = {f"{prefix}.{n}": p.detach() for n, p in experts.named_parameters()}
    ckpt = str(tmp_path / "moe.safetensors")
    _write_checkpoint(ckpt, tensors)
    model = tmp_path / "moe.model.yaml"
    model.write_text("format: shardc.model/v1\nname: moe\ndtype: float32\n"
                     "attributes: {num_experts: 6}\nparams:\n" +
                     "".join(f"  - {{name: {n}, shape: {list(t.shape)}}}\n"
                             for n, t in tensors.items()))
    recipe = tmp_path / "moe.recipe.yaml"
    recipe.write_text("format: shardc.recipe/v1\nmesh: [{name: ep, size: 4}]\n"
                      "rules: [{match: '**', placements: {ep: Shard(0)}}]\n")
    out = sr.OutDir(harness.compile_plan(shardc, str(model), str(recipe), str(tmp_path / "moe")))
    return out, ckpt, config, experts


def test_uneven_ep_experts(shardc: str, tmp_path: Any) -> None:
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    out, ckpt, config, full = _moe_plan(shardc, tmp_path)
    ck = sr.Checkpoint(ckpt)
    g = torch.Generator().manual_seed(3)
    hidden = torch.randn(10, 8, generator=g)
    index = torch.stack([torch.randperm(6, generator=g)[:2] for _ in range(10)])
    weights = torch.rand(10, 2, generator=g)
    want = full(hidden, index, weights)
    total = torch.zeros_like(want)
    prefix = "model.layers.0.mlp.experts"
    for rank, ids in enumerate([range(0, 2), range(2, 4), range(4, 6), range(6, 6)]):
        me = out.rank(rank)
        assert sr.expert_ids(me) == {prefix: ids}
        experts = Qwen3MoeExperts(config)
        with torch.no_grad():
            for name in ("gate_up_proj", "down_proj"):
                setattr(experts, name, torch.nn.Parameter(
                    _local(me.params[f"{prefix}.{name}"], ck)))
        with pytest.raises(IndexError):  # global ids index past the local experts
            experts(hidden, index, weights)
        told = apply_local_attributes(_holder(prefix, experts), me)
        assert told == [f"{prefix}: experts [{ids.start}, {ids.stop}) of the layer, "
                        f"num_experts {len(ids)}"], told
        total += experts(hidden, index, weights)
    err = ((total - want).norm() / want.norm()).item()
    assert err < 1e-6, f"sum of the EP ranks' expert outputs differs (relative error {err})"


def test_padded_vocab_embedding(shardc: str, tmp_path: Any) -> None:
    torch.manual_seed(0)
    full = torch.nn.Embedding(37, 8)
    ckpt = str(tmp_path / "emb.safetensors")
    _write_checkpoint(ckpt, {"embed_tokens.weight": full.weight.detach()})
    model = tmp_path / "emb.model.yaml"
    model.write_text("format: shardc.model/v1\nname: emb\ndtype: float32\n"
                     "attributes: {vocab_size: 37}\n"
                     "params: [{name: embed_tokens.weight, shape: [37, 8]}]\n")
    recipe = tmp_path / "emb.recipe.yaml"
    recipe.write_text("format: shardc.recipe/v1\nmesh: [{name: tp, size: 4}]\n"
                      "rules: [{match: '**', placements: {tp: Shard(0)}, uneven: {pad: 8}}]\n")
    out = sr.OutDir(harness.compile_plan(shardc, str(model), str(recipe), str(tmp_path / "emb")))
    ck = sr.Checkpoint(ckpt)
    tokens = torch.randint(0, 37, (3, 7), generator=torch.Generator().manual_seed(5))
    want = full(tokens)
    total = torch.zeros_like(want)
    expect = [(range(0, 16), 0), (range(16, 32), 0), (range(32, 37), 11), (range(37, 37), 16)]
    for rank, (tokens_held, padding) in enumerate(expect):
        me = out.rank(rank)
        assert sr.vocab_range(me, "embed_tokens.weight") == tokens_held
        assert sr.vocab_padding(me, "embed_tokens.weight") == padding
        embedding = torch.nn.Embedding(16, 8)
        embedding.weight = torch.nn.Parameter(_local(me.params["embed_tokens.weight"], ck))
        apply_local_attributes(_holder("embed_tokens", embedding), me)
        total += embedding(tokens)
    assert torch.equal(total, want)


def test_refused(shardc: str, tmp_path: Any) -> None:
    """A module the rank file names that the model lacks, a section a reader cannot
    trust (count not its range's size), and a rank file without the section."""
    out, _, _, _ = _moe_plan(shardc, tmp_path)
    me = out.rank(0)
    with pytest.raises(sr.PlanError, match="'model.layers.0.mlp.experts' of the rank file is "
                                           "not a module"):
        apply_local_attributes(torch.nn.Module(), me)
    doc = json.loads(json.dumps(me.doc))
    doc["local_attributes"]["experts"]["model.layers.0.mlp.experts"]["local_experts"] = 3
    forged = sr.RankFile.read(doc, out.plan, "forged.json")
    with pytest.raises(sr.PlanError, match="local_experts 3 is not the size of expert_range"):
        sr.expert_ids(forged)
    del doc["local_attributes"]
    with pytest.raises(sr.PlanError, match="local_attributes: missing"):
        sr.local_attributes(sr.RankFile.read(doc, out.plan, "old.json"))
