"""Tell the modules of a sharded model what they hold (issue 28 item 5, contract §6.7).

`apply_local_attributes(model, rank_file)` reads the rank file's `local_attributes`
(shardc_runtime.attributes) and sets what transformers 5.24 reads at forward time:

* attention modules: `num_key_value_groups` (read by eager_attention_forward and
  sdpa_attention_forward through `repeat_kv`, models/llama/modeling_llama.py and
  integrations/sdpa_attention.py) = local query heads / KV heads they attend, and
  `num_heads` / `num_key_value_heads` where a module keeps them. The q / k / v
  reshapes use `view(..., -1, head_dim)`, so they follow the local tensors. When the
  KV projections are replicated over ranks that split the queries (kv < tp), a
  forward hook on `k_proj` / `v_proj` keeps only the KV heads the rank's query heads
  attend (`kv_head_range_used`), as vLLM's replicated KV heads do.
* expert modules (a `num_experts` attribute and forward(hidden_states, top_k_index,
  top_k_weights): Qwen3MoeExperts, MixtralExperts, ...): `num_experts` = the local
  count (as transformers' distributed/expert_parallel.py MoEParamShard does), and a
  pre-hook mapping global expert ids to local ones, routes to other ranks' experts to
  the sentinel `num_experts` with weight 0 (transformers' AllReduceEP, here for any
  contiguous range, uneven EP included); with `ep_group`, the outputs are summed over
  it (differentiable all-reduce).
* vocab-parallel `nn.Embedding`s whose weight is a plain local shard (no DTensor: a
  DTensor weight already masks by its placements): token ids outside the rank's
  `token_range` look up row 0 and give zeros, ids inside are shifted to local rows
  (Megatron-Core's VocabParallelEmbedding); with `tp_group`, the outputs are summed
  over it.

Returns one line per module told, for logs. Refuses (PlanError) a module the rank
file names that the model lacks, an attention module whose split cuts a head, and
query heads that do not map onto the attended KV heads the way `repeat_kv` repeats
them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

from ..attributes import Heads, local_attributes
from ..errors import PlanError
from ..layout import RankFile

_KV_PROJECTIONS = ("k_proj", "v_proj", "wk", "wv")


def _module(model: nn.Module, fqn: str, what: str) -> nn.Module:
    try:
        return model.get_submodule(fqn)
    except AttributeError:
        raise PlanError(f"{what} {fqn!r} of the rank file is not a module of the model") from None


def _drop_hooks(module: nn.Module) -> None:
    for handle in getattr(module, "_shardc_attribute_hooks", ()):
        handle.remove()
    module._shardc_attribute_hooks = []  # type: ignore[assignment]


def _keep(module: nn.Module, handle: Any) -> None:
    module._shardc_attribute_hooks.append(handle)  # type: ignore[union-attr, operator]


def _kv_groups(module: nn.Module, fqn: str, heads: Heads) -> int:
    """Query heads per attended KV head, checked against the model's own grouping
    (query head h attends KV head h // (num_attention_heads // num_key_value_heads))."""
    used = len(heads.kv_used)
    if heads.q_heads == 0 or used == 0:
        return 1
    config = getattr(module, "config", None)
    global_groups = (config.num_attention_heads // (config.num_key_value_heads
                                                     or config.num_attention_heads)
                     if config is not None and getattr(config, "num_attention_heads", None)
                     else None)
    groups = heads.q_heads // used
    maps = heads.q_heads % used == 0 and (
        global_groups is None
        or all((heads.query.start + i) // global_groups - heads.kv_used.start == i // groups
               for i in range(heads.q_heads)))
    if not maps:
        raise PlanError(f"{fqn}: query heads [{heads.query.start}, {heads.query.stop}) do not "
                        f"repeat KV heads [{heads.kv_used.start}, {heads.kv_used.stop}) evenly "
                        "(repeat_kv); shard the queries in whole KV groups")
    return groups


def _narrow_kv(module: nn.Module, fqn: str, heads: Heads) -> None:
    head_dim = getattr(module, "head_dim", None)
    if not isinstance(head_dim, int):
        raise PlanError(f"{fqn}: KV heads [{heads.key_value.start}, {heads.key_value.stop}) held "
                        f"but only [{heads.kv_used.start}, {heads.kv_used.stop}) attended, and "
                        "the module has no head_dim to narrow k / v by")
    low = (heads.kv_used.start - heads.key_value.start) * head_dim
    high = (heads.kv_used.stop - heads.key_value.start) * head_dim

    def narrow(_mod: nn.Module, _args: Any, output: torch.Tensor) -> torch.Tensor:
        return output[..., low:high]

    found = False
    for name in _KV_PROJECTIONS:
        proj = getattr(module, name, None)
        if isinstance(proj, nn.Module):
            _drop_hooks(proj)
            _keep(proj, proj.register_forward_hook(narrow))
            found = True
    if not found:
        raise PlanError(f"{fqn}: KV heads to narrow but no k_proj / v_proj (wk / wv) module")


def _attention(module: nn.Module, fqn: str, heads: Heads) -> str:
    groups = _kv_groups(module, fqn, heads)
    if hasattr(module, "num_key_value_groups"):
        setattr(module, "num_key_value_groups", groups)
    for attr, value in (("num_heads", heads.q_heads), ("num_key_value_heads", len(heads.kv_used))):
        if hasattr(module, attr):
            setattr(module, attr, value)
    narrowed = heads.kv_used != heads.key_value
    if narrowed:
        _narrow_kv(module, fqn, heads)
    return (f"{fqn}: q heads [{heads.query.start}, {heads.query.stop}), KV heads "
            f"[{heads.kv_used.start}, {heads.kv_used.stop})"
            + (f" of [{heads.key_value.start}, {heads.key_value.stop}) held" if narrowed else "")
            + f", num_key_value_groups {groups}")


def _all_reduce(tensor: torch.Tensor, group: Any) -> torch.Tensor:
    from torch.distributed.nn.functional import all_reduce
    return all_reduce(tensor, op=dist.ReduceOp.SUM,  # type: ignore[no-untyped-call, no-any-return]
                      group=group)


def _experts(module: nn.Module, fqn: str, ids: range, ep_group: Any) -> str:
    if not hasattr(module, "num_experts"):
        raise PlanError(f"{fqn}: the rank file gives its expert ids but the module has no "
                        "num_experts (not a transformers experts module)")
    setattr(module, "num_experts", len(ids))
    _drop_hooks(module)
    start, stop, local = ids.start, ids.stop, len(ids)

    def route(_mod: nn.Module, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        names = ("hidden_states", "top_k_index", "top_k_weights")
        values = list(args) + [kwargs.pop(name) for name in names[len(args):]]
        index, weights = values[1], values[2]
        off_rank = (index < start) | (index >= stop)
        values[1] = torch.where(off_rank, local, index - start)
        values[2] = weights.masked_fill(off_rank, 0.0)
        return tuple(values), kwargs

    _keep(module, module.register_forward_pre_hook(route, with_kwargs=True))
    if ep_group is not None:
        _keep(module, module.register_forward_hook(
            lambda _m, _a, out: _all_reduce(out, ep_group)))
    return f"{fqn}: experts [{start}, {stop}) of the layer, num_experts {local}"


def _vocab(module: nn.Module, fqn: str, tokens: range, tp_group: Any) -> str:
    _drop_hooks(module)
    if not isinstance(module, nn.Embedding):
        return f"{fqn}: tokens [{tokens.start}, {tokens.stop}) (not an nn.Embedding: not hooked)"
    start, stop = tokens.start, tokens.stop
    masks: list[torch.Tensor] = []

    def lookup(mod: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if isinstance(mod.weight, DTensor):
            return None  # DTensor's own vocab-parallel lookup (torch's _MaskPartial)
        ids = args[0]
        off = (ids < start) | (ids >= stop)
        masks.append(off)
        return ((ids - start).masked_fill(off, 0), *args[1:])

    def combine(mod: nn.Module, _args: Any, output: torch.Tensor) -> torch.Tensor:
        if isinstance(mod.weight, DTensor):
            return output
        out = output.masked_fill(masks.pop()[..., None], 0.0)
        return _all_reduce(out, tp_group) if tp_group is not None else out

    _keep(module, module.register_forward_pre_hook(lookup))
    _keep(module, module.register_forward_hook(combine))
    return f"{fqn}: tokens [{start}, {stop}) at local rows 0..{stop - start - 1}"


def apply_local_attributes(model: nn.Module, rank_file: RankFile, *, ep_group: Any = None,
                           tp_group: Any = None) -> list[str]:
    """Sets the rank file's local attributes on `model`'s modules (see the module
    docstring); `ep_group` / `tp_group`: the process groups summing the expert and
    vocab-parallel embedding outputs (None: the caller sums them). Applying twice
    replaces the hooks. Returns one line per module told."""
    attrs = local_attributes(rank_file)
    told = []
    for fqn, heads in attrs.attention.items():
        if heads is None:
            raise PlanError(f"{rank_file.path}: {fqn}: a split cuts a head, the local head "
                            "counts are undefined (see the compile's E-HEADS / W-FUSED-SPLIT)")
        told.append(_attention(_module(model, fqn, "attention module"), fqn, heads))
    for fqn, experts in attrs.experts.items():
        if experts is None:
            raise PlanError(f"{rank_file.path}: {fqn}: its stacked params split the experts "
                            "differently, no one expert range")
        told.append(_experts(_module(model, fqn, "expert module"), fqn, experts.ids, ep_group))
    for name, vocab in attrs.vocab.items():
        fqn = name.removesuffix(".weight")
        told.append(_vocab(_module(model, fqn, "vocab module"), fqn, vocab.tokens, tp_group))
    return told
