"""The model a training script built, checked against the plan before the adapter
changes anything (`distribute_model`, `apply_fully_shard`, `fsdp2_mismatches`).

The module is what the user trains; the plan must describe it. `model_mismatches`
compares every parameter of the module (`named_parameters(remove_duplicate=False)`,
on the meta device or any, plain tensors or DTensors: a DTensor's shape is the
global one) with the plan and returns one message per difference, each naming the
FQN, the plan's value and the module's:

* a parameter the plan does not have (with `plan`: plan.json; without: the rank file);
* a parameter this rank holds (rank file) that the module lacks (a module of another
  pipeline stage lacks the other stages' params; those are not asked for);
* a global shape or dtype other than plan.json's;
* ties: the module's shared Parameter objects must be plan.json's `alias_of` classes,
  both ways (transformers' modules are the truth for ties, docs/pytorch.md): a tie
  the plan lacks, or a tie the plan has and the module not;
* `requires_grad`: a floating-point param the module froze but the plan trains. The
  reverse (the plan freezes what a freshly built module trains) is the recipe's
  freezing and not a difference: `distribute_model` applies the plan's.

`check_model` raises one `PlanError` listing them all (nothing is changed before).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from ..errors import PlanError
from ..layout import OutDir, RankFile
from .tensors import torch_dtype

_SHOWN = 12  # differences listed in a PlanError (the count is always given)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


# what to do, per kind of difference (given once under the list)
_HINTS = {
    "name": "build the model from the config the plan was compiled from (same layers and "
            "parameter names), or recompile the plan from this model",
    "shape": "build the model from the config the plan was compiled from, or recompile the "
             "plan from this model",
    "dtype": "build the model in the plan's dtype (e.g. model.to(dtype) on the meta device), "
             "recompile the plan from a checkpoint of the model's dtype, or pass "
             "dtype_from_plan=True to distribute_model to take the plan's",
    "tie": "tie or untie the model as the checkpoint the plan was compiled from does "
           "(e.g. config.tie_word_embeddings), or recompile the plan from this model",
    "frozen": "freeze it in the recipe (requires_grad false) and recompile, or leave it "
              "trainable in the model",
}


def _differences(model: nn.Module, rank_file: RankFile, plan: OutDir | None,
                 dtypes: bool) -> list[tuple[str, str]]:
    """[(kind, message)] of model_mismatches."""
    specs: Mapping[str, Mapping[str, Any]] = plan.params if plan is not None else {}
    named = list(model.named_parameters(remove_duplicate=False))
    have = {name for name, _ in named}
    out: list[tuple[str, str]] = []

    def plan_of(name: str) -> tuple[tuple[int, ...], str, str | None] | None:
        info = rank_file.params.get(name)
        if info is not None:
            return info.global_shape, info.dtype, info.alias_of or info.tied_copy_of
        spec = specs.get(name)
        if spec is None:
            return None
        return tuple(spec["global_shape"]), str(spec["dtype"]), spec.get("alias_of")

    groups: dict[int, list[str]] = {}
    roots: dict[str, str] = {}
    for name, param in named:
        groups.setdefault(id(param), []).append(name)
        want = plan_of(name)
        if want is None:
            out.append(("name", f"{name}: the model has this parameter, plan.json has not"
                        if plan is not None else f"{name}: the model has this parameter, "
                        f"rank {rank_file.rank}'s file does not list it"))
            continue
        shape, dtype, alias = want
        roots[name] = alias or name
        if tuple(param.shape) != shape:
            out.append(("shape", f"{name}: the model's shape is {list(param.shape)}, the plan's "
                        f"global shape {list(shape)}"))
        if dtypes and param.dtype != torch_dtype(dtype):
            out.append(("dtype", f"{name}: the model holds {_dtype_name(param.dtype)}, the "
                        f"plan {dtype}"))
        info = rank_file.params.get(name)
        if info is not None and info.requires_grad and not param.requires_grad and \
                (param.dtype.is_floating_point or param.dtype.is_complex):
            out.append(("frozen", f"{name}: the model froze it (requires_grad False), the plan "
                        "trains it (requires_grad true)"))
    for name in rank_file.params:
        if name not in have:
            out.append(("name", f"{name}: rank {rank_file.rank} holds it, the model has no such "
                        "parameter"))
    # ties: the module's classes of one Parameter object vs plan.json's alias_of classes
    ids = {name: id(param) for name, param in named}
    for names in groups.values():
        known = [n for n in names if n in roots]
        other = next((n for n in known if roots[n] != roots[known[0]]), None)
        if other is not None:
            out.append(("tie", f"{other}: the model ties it to {known[0]} (one Parameter), the "
                        "plan does not (no alias_of joins them in plan.json)"))
    plan_class: dict[str, list[str]] = {}
    for name, root in roots.items():
        plan_class.setdefault(root, []).append(name)
    for root, names in plan_class.items():
        if len({ids[n] for n in names}) > 1:
            apart = [n for n in names if ids[n] != ids[names[0]]]
            out.append(("tie", f"{apart[0]}: the plan ties it to {root} (alias_of), the model "
                        f"holds {apart[0]} and {names[0]} as separate Parameters"))
    return out


def model_mismatches(model: nn.Module, rank_file: RankFile, plan: OutDir | None = None, *,
                     dtypes: bool = True) -> list[str]:
    """Differences between `model`'s parameters and the plan (module doc); [] when
    the module is the one the plan describes. With `plan` (an OutDir), params the
    rank does not hold (another pipeline stage) are checked against plan.json;
    without, every module param must be one the rank file lists. `dtypes=False`
    leaves dtypes out (`distribute_model(dtype_from_plan=True)`)."""
    return [message for _, message in _differences(model, rank_file, plan, dtypes)]


def check_model(model: nn.Module, rank_file: RankFile, plan: OutDir | None, caller: str, *,
                dtypes: bool = True) -> None:
    """PlanError listing `model_mismatches` and what to do, when there are any (the
    module is left as it is)."""
    found = _differences(model, rank_file, plan, dtypes)
    if not found:
        return
    where = f"{plan.path}/plan.json" if plan is not None else rank_file.path
    shown = "\n  ".join(message for _, message in found[:_SHOWN])
    more = f"\n  ... and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
    kinds = [kind for kind in _HINTS if any(k == kind for k, _ in found)]
    todo = "\n".join(f"{kind}: {_HINTS[kind]}" for kind in kinds)
    raise PlanError(f"{caller}: the model is not the one {where} describes "
                    f"({len(found)} difference{'s' if len(found) > 1 else ''}; the model was "
                    f"not changed):\n  {shown}{more}\nWhat to do, by kind of difference:\n{todo}")
