"""One rank of the misuse checks (test_hostile.py::test_model_and_launch_misuse;
imported by worker.py): a training script's mistakes that the adapter must refuse,
on every rank, before it changes anything.

A tiny transformers `LlamaForCausalLM` is built on the meta device from the
checkpoint's config.json (overrides give the mistakes) and handed to
`distribute_model` / `apply_fully_shard` under a 4-rank plan (dp_shard 2 x tp 2):

* a module that is not the plan's (MLP width, fewer layers, a tie the plan lacks or
  lacks the plan's, another dtype, a param frozen that the plan trains, an extra
  param): PlanError naming the FQN, both values, and the module left untouched;
  the right module (untied and tied) is accepted; `dtype_from_plan=True` is the
  explicit dtype conversion;
* `apply_fully_shard` with `dp_mesh` in the wrong form (a bare DeviceMesh, another
  key, the tp axis): TypeError / ValueError saying the expected form, nothing sharded;
* a launch of another world size than the plan's (2- and 8-rank plans on 4
  processes): PlanError on every rank naming both numbers and the OUTDIR;
  `allow_spare_ranks=True` lets the 2-rank plan through.

Each refusal prints `REFUSED <label> on rank <r>: <type>: <message>`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from transformers import AutoConfig, AutoModelForCausalLM

from shardc_runtime import Checkpoint, OutDir, PlanError
from shardc_runtime.torch import apply_fully_shard, device_meshes, distribute_model

UP = "model.layers.0.mlp.up_proj.weight"
EMBED = "model.embed_tokens.weight"


def build(ckpt: str, **overrides: Any) -> nn.Module:
    config = AutoConfig.from_pretrained(ckpt)
    for key, value in overrides.items():
        setattr(config, key, value)
    with torch.device("meta"):
        model: nn.Module = AutoModelForCausalLM.from_config(config)
    return model


def snapshot(model: nn.Module) -> list[tuple[str, int, tuple[int, ...], torch.dtype, bool]]:
    return [(name, id(p), tuple(p.shape), p.dtype, p.requires_grad)
            for name, p in model.named_parameters(remove_duplicate=False)]


def run(task: dict[str, Any], rank: int, world: int, fail: Callable[[str], None]) -> list[str]:
    out, tied = OutDir(task["outdir"]), OutDir(task["tied_outdir"])
    ckpt, tied_ckpt = task["ckpt"], task["tied_ckpt"]
    small, big = OutDir(task["small"]), OutDir(task["big"])

    def refused(label: str, call: Callable[[], Any], kind: type[BaseException],
                needles: list[str], model: nn.Module | None = None) -> None:
        before = snapshot(model) if model is not None else None
        try:
            call()
        except Exception as ex:  # noqa: BLE001 - the type is the check
            text = str(ex)
            print(f"REFUSED {label} on rank {rank}: {type(ex).__name__}: "
                  f"{text.splitlines()[0][:400]}", flush=True)
            if rank == 0:
                print(f"FULL {label}: {text}", flush=True)
            if type(ex) is not kind:
                fail(f"{label}: {type(ex).__name__} ({text[:300]}), expected {kind.__name__}")
            for needle in needles:
                if needle not in text:
                    fail(f"{label}: message lacks {needle!r}: {text[:600]}")
        else:
            fail(f"{label}: accepted on rank {rank}")
        if model is not None:
            if snapshot(model) != before:
                fail(f"{label}: the module changed before the refusal on rank {rank}")
            if any(isinstance(m, FSDPModule) for m in model.modules()):
                fail(f"{label}: fully_shard ran before the refusal on rank {rank}")

    me = out.rank(rank)
    meshes = device_meshes(out, me)
    ck = Checkpoint(os.path.join(ckpt, "model.safetensors"))
    plan_json = f"{out.path}/plan.json"

    # --- distribute_model: the module must be the plan's ---
    cases: list[tuple[str, nn.Module, OutDir, str, list[str]]] = [
        ("wider MLP", build(ckpt, intermediate_size=48), out, ckpt,
         [f"distribute_model: the model is not the one {plan_json} describes (6 differences; "
          "the model was not changed)", f"{UP}: the model's shape is [48, 16], the plan's global shape [24, 16]"]),
        ("fewer layers", build(ckpt, num_hidden_layers=1), out, ckpt,
         [f"model.layers.1.self_attn.q_proj.weight: rank {rank} holds it",
          "the model has no such parameter", "name: build the model from the config"]),
        ("tied model, untied plan", build(ckpt, tie_word_embeddings=True), out, ckpt,
         [f"lm_head.weight: the model ties it to {EMBED} (one Parameter), the plan does not",
          "tie: tie or untie the model"]),
        ("untied model, tied plan", build(tied_ckpt, tie_word_embeddings=False), tied, tied_ckpt,
         [f"lm_head.weight: the plan ties it to {EMBED} (alias_of), the model holds"]),
        ("bf16 model", build(ckpt).to(torch.bfloat16), out, ckpt,
         [f"{EMBED}: the model holds bfloat16, the plan float32", "dtype_from_plan=True",
          "... and 9 more"]),
    ]
    frozen = build(ckpt)
    frozen.get_parameter(EMBED).requires_grad_(False)
    cases.append(("frozen param", frozen, out, ckpt,
                  [f"{EMBED}: the model froze it (requires_grad False), the plan trains it",
                   "frozen: freeze it in the recipe"]))
    extra = build(ckpt)
    extra.get_submodule("model").register_parameter(
        "extra", nn.Parameter(torch.empty(3, device="meta")))
    cases.append(("extra param", extra, out, ckpt,
                  ["model.extra: the model has this parameter, plan.json has not"]))
    for label, model, plan, path, needles in cases:
        refused(f"distribute_model: {label}", lambda: distribute_model(
            model, plan, rank, Checkpoint(os.path.join(path, "model.safetensors")), meshes),
            PlanError, needles, model)
    # the right modules are accepted; the dtype conversion only when asked for
    for label, model, plan, path in [("untied", build(ckpt), out, ckpt),
                                     ("tied", build(tied_ckpt), tied, tied_ckpt),
                                     ("bf16, dtype_from_plan", build(ckpt).to(torch.bfloat16), out,
                                      ckpt)]:
        distribute_model(model, plan, rank, Checkpoint(os.path.join(path, "model.safetensors")),
                         meshes, dtype_from_plan=label.startswith("bf16"))
        params = dict(model.named_parameters(remove_duplicate=False))
        if not all(isinstance(p, DTensor) and p.dtype == torch.float32 for p in params.values()):
            fail(f"distribute_model {label}: not every param a float32 DTensor")
        if (params["lm_head.weight"] is params[EMBED]) != (label == "tied"):
            fail(f"distribute_model {label}: lm_head tied {not label == 'tied'}")

    # --- apply_fully_shard: the same check, and dp_mesh's form ---
    dense = meshes["dense"]
    for label, model in [("wider MLP", build(ckpt, intermediate_size=48)),
                         ("fewer layers", build(ckpt, num_hidden_layers=1))]:
        refused(f"apply_fully_shard: {label}",
                lambda: apply_fully_shard(model, me, {"dense": dense["dp_shard"]}), PlanError,
                [f"apply_fully_shard: the model is not the one {me.path} describes"], model)
    wrong_forms: list[tuple[str, Any, type[BaseException], list[str]]] = [
            ("a DeviceMesh", dense["dp_shard"], TypeError,
             ["dp_mesh must be a dict {plan mesh name: FSDP DeviceMesh}", "['dense']",
              "meshes['dense']['dp_shard']"]),
            ("key 'default'", {"default": dense["dp_shard"]}, ValueError,
             ["no FSDP mesh for the plan's mesh 'dense'", "['default']"]),
            ("the tp axis", {"dense": dense["tp"]}, ValueError,
             ["dp_mesh['dense'] DeviceMesh((tp=2)", "spans ranks [", "the FSDP group of unit",
              "meshes['dense']['dp_shard']"])]
    for label, dp, kind, needles in wrong_forms:
        model = build(ckpt)
        refused(f"apply_fully_shard: {label}", lambda: apply_fully_shard(model, me, dp), kind,
                needles, model)

    # --- launch vs plan world size: every rank refuses ---
    for plan in (small, big):
        for label, call in [
                ("device_meshes", lambda: device_meshes(plan)),
                ("distribute_model", lambda: distribute_model(build(ckpt), plan, rank, ck))]:
            refused(f"world {plan.world_size}: {label}", call, PlanError,
                    [f"{label}: the process group has {world} ranks, {plan.path} was compiled "
                     f"for world_size {plan.world_size}"])
    spare = device_meshes(small, allow_spare_ranks=True)["dense"]
    if (spare.get_coordinate() is None) != (rank >= small.world_size):
        fail(f"allow_spare_ranks: rank {rank} coordinate {spare.get_coordinate()}")
    print(f"rank {rank}: misuse checks done", flush=True)
    return []
