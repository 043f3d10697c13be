"""transformers' own tensor parallelism judges `shardc recipe --from-hf-tp-plan`.

For each dense architecture with a `base_model_tp_plan` (Llama, Qwen2, Gemma-2), a model
shrunk in layers and width but with the same structure (heads, KV heads, an uneven vocab)
is saved by transformers itself; tools/hf_tp_plan.py writes its `model.tp_plan`; shardc
turns it into a recipe and compiles the checkpoint directory. Then every rank of the tp
group loads the checkpoint with transformers' native tensor parallelism
(`from_pretrained(..., distributed_config=DistributedConfig(tp_size=N))`) on PyTorch's
fake process group, and each parameter's local shape, placement and global offset must
equal the rank file's. Llama-4 (its checkpoint stores the routed experts pre-stacked, as
transformers' modules hold them) is judged the same way: its plan names the 3-D expert
params themselves (`experts.gate_up_proj`: packed_rowwise, transformers'
`_StridedShard(-1, split_factor=2)`, which shardc states as boxes; `experts.down_proj`:
colwise) and hooks the experts module (moe_tp_experts). The MoE architectures whose
checkpoint stores each expert apart (Mixtral, Qwen3-MoE, DeepSeek-V3) are judged on what
transformers loaded: its loader fuses them into 3-D params (`experts.gate_up_proj` =
MergeModulelist(dim=0) of each expert's gate and of its up, then Concatenate(dim=1);
`experts.down_proj` = MergeModulelist(dim=0)), the plan dump's `sources` says which
checkpoint tensors make each, and on every tp rank transformers' local tensor of each fused
param must equal, element for element, the rank file's boxes of those checkpoint tensors
assembled by the same operations (DeepSeek-V3's expert width 50 is uneven over tp 4). A plan
dumped without `sources` (from a config.json) is still refused for them, naming the reason.

Expert parallelism: for the architectures with a `base_model_ep_plan` (Mixtral, Qwen3-MoE,
DeepSeek-V3 with experts stored apart; gpt-oss with them pre-stacked) the same dump's
`ep_plan` is translated too (`shardc recipe ... --tp 4 --ep 4`: grouped_gemm = an `experts`
entry Shard(0) on ep, the tp rules on those modules dropped as transformers drops them), and
each rank process also loads the checkpoint with transformers' own EP
(`DistributedConfig(tp_size=4, ep_size=4)`): every param's layout, every expert tensor's data
(fused ones against the rank file's stacked per-expert params joined by the loader's
operations) and each MoE layer's local expert count and first expert (`local_attributes`)
must agree; Llama-4, which has no ep_plan, is refused.

The rank files' local attributes (contract §6.7) are judged on the same ranks: each
attention module's local query / KV head counts equal the rows transformers' TP left in
its q_proj / k_proj (over its head_dim) and transformers' own `get_kv_heads_per_rank`
(what it sizes its KV cache by), the query heads per attended KV head equal the module's
`num_key_value_groups` (transformers' TP sets no head count on attention modules: its
forward reshapes with `view(..., -1, head_dim)` and keeps the global grouping, right
when q and k/v are split alike), and each vocab tensor's token range equals the dim-0
box of transformers' DTensor."""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import judge

# Imported once here, before any fork: every child below (the tiny checkpoint's writer, the
# tp-plan dump, one per tp rank) starts with transformers loaded instead of importing it
# again (seconds each). The parent runs no torch op, so no OpenMP pool exists to inherit.
import transformers  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402,F401
from transformers.distributed import DistributedConfig  # noqa: E402,F401

for _arch in ("llama", "qwen2", "gemma2", "llama4", "mixtral", "qwen3_moe", "deepseek_v3",
              "gpt_oss"):
    importlib.import_module(f"transformers.models.{_arch}.modeling_{_arch}")

REPO = Path(__file__).resolve().parent.parent.parent
TP = 4
SHRUNK: dict[str, dict[str, Any]] = {
    "llama": dict(hidden_size=64, intermediate_size=96, num_attention_heads=8,
                  num_key_value_heads=4, num_hidden_layers=2, vocab_size=130),
    "qwen2": dict(hidden_size=64, intermediate_size=96, num_attention_heads=8,
                  num_key_value_heads=4, num_hidden_layers=2, vocab_size=130,
                  tie_word_embeddings=True),
    "gemma2": dict(hidden_size=64, intermediate_size=96, num_attention_heads=8,
                   num_key_value_heads=4, head_dim=16, num_hidden_layers=2, vocab_size=130),
    # layer 1 MoE (interleave 2), layer 0 a dense feed_forward; experts [E, hidden, 2 x 48]
    # gate|up blocked: tp 4 cuts each half in 12-column pieces
    "llama4_text": dict(hidden_size=64, intermediate_size=48, intermediate_size_mlp=96,
                        num_attention_heads=8, num_key_value_heads=4, head_dim=8,
                        num_hidden_layers=2, vocab_size=130, num_local_experts=4,
                        interleave_moe_layer_step=2),
    # every layer MoE; experts stored per expert (block_sparse_moe.experts.E.w1/w2/w3)
    "mixtral": dict(hidden_size=64, intermediate_size=48, num_attention_heads=8,
                    num_key_value_heads=4, num_hidden_layers=2, vocab_size=130,
                    num_local_experts=4, num_experts_per_tok=2),
    # layer 0 a dense mlp (mlp_only_layers), layer 1 MoE (mlp.experts.E.gate_proj/up_proj/down_proj)
    "qwen3_moe": dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=48,
                      num_attention_heads=8, num_key_value_heads=4, head_dim=8,
                      num_hidden_layers=2, vocab_size=130, num_experts=4, num_experts_per_tok=2,
                      mlp_only_layers=[0]),
    # layer 0 dense (first_k_dense_replace), layer 1 routed + shared experts; MLA attention
    # (no tp entry: replicated); expert width 50 over tp 4 = 13, 13, 13, 11
    "deepseek_v3": dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=50,
                        num_attention_heads=8, num_key_value_heads=8, num_hidden_layers=2,
                        vocab_size=130, n_routed_experts=4, num_experts_per_tok=2, n_group=2,
                        topk_group=1, first_k_dense_replace=1, q_lora_rank=32,
                        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8),
    # experts pre-stacked in the checkpoint as in the module ([E, hidden, 2 x inter] gate|up
    # interleaved, biases); its tp_plan splits only the embedding and the head
    "gpt_oss": dict(hidden_size=64, intermediate_size=48, num_attention_heads=8,
                    num_key_value_heads=4, head_dim=8, num_hidden_layers=2, vocab_size=130,
                    num_local_experts=4, num_experts_per_tok=2,
                    layer_types=["sliding_attention", "full_attention"]),
}
# The architectures with a base_model_ep_plan (transformers 5.24; Llama-4 has none): their
# plan dump's ep_plan is also translated (`--ep`) and judged against transformers' own EP
EP_ARCHS = ("mixtral", "qwen3_moe", "deepseek_v3", "gpt_oss")


def save_tiny(model_type: str, out: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    conf = AutoConfig.for_model(model_type, **SHRUNK[model_type])
    AutoModelForCausalLM.from_config(conf).save_pretrained(out)


HfRank = tuple[dict[str, tuple[list[int], list[int], list[str]]], dict[str, tuple[int, int, int]],
               Any, dict[str, list[Any]]]


def attention_heads(module: Any) -> tuple[int, int] | None:
    """(local q heads, local KV heads) of an attention module from its TP-local
    projections: q_proj / k_proj rows over head_dim, or MLA's q_b_proj (q_proj without a
    q LoRA) over qk_head_dim and kv_b_proj over qk_nope_head_dim + v_head_dim."""
    from torch.distributed.tensor import DTensor

    def rows(linear: Any) -> int:
        w = linear.weight
        return int((w.to_local() if isinstance(w, DTensor) else w).shape[0])

    if hasattr(module, "kv_b_proj"):
        q = module.q_proj if getattr(module, "q_proj", None) is not None else module.q_b_proj
        return (rows(q) // module.qk_head_dim,
                rows(module.kv_b_proj) // (module.qk_nope_head_dim + module.v_head_dim))
    if hasattr(module, "q_proj") and hasattr(module, "k_proj"):
        return rows(module.q_proj) // module.head_dim, rows(module.k_proj) // module.head_dim
    return None


def param_layouts(model: Any) -> dict[str, tuple[list[int], list[int], list[str]]]:
    """Each param of a loaded model: (local shape, global offset, placements)."""
    from torch.distributed.tensor import DTensor

    out = {}
    for name, p in model.named_parameters():
        if isinstance(p, DTensor):
            local, off = judge.compute_local_shape_and_global_offset(p.shape, p.device_mesh,
                                                                     p.placements)
            out[name] = (list(local), judge._empty_convention(list(local), list(off), list(p.shape)),
                         [judge._label(q) for q in p.placements])
        else:
            out[name] = (list(p.shape), [0] * p.dim(), [])
    return out


EpRank = tuple[dict[str, tuple[list[int], list[int], list[str]]], dict[str, list[Any]],
               dict[str, int]]


def hf_ep_rank(ckpt: str, world: int) -> EpRank:
    """The same rank under transformers' expert parallelism (`DistributedConfig(tp_size=N,
    ep_size=N)`: the ep_plan's grouped_gemm shards the stacked experts Shard(0) on the ep
    mesh, its tp rules on those modules dropped): every param's layout, the local data of
    every expert param (fused by the loader or pre-stacked), and each experts module's
    `num_experts` (MoEParamShard sets the local count)."""
    from torch.distributed.tensor import DTensor
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig

    model = AutoModelForCausalLM.from_pretrained(
        ckpt, distributed_config=DistributedConfig(tp_size=world, ep_size=world))
    data = {name: (p.to_local() if isinstance(p, DTensor) else p).detach().float().tolist()
            for name, p in model.named_parameters() if ".experts." in name}
    counts = {name: int(m.num_experts) for name, m in model.named_modules()
              if getattr(m, "_is_expert_parallel", False)}
    return param_layouts(model), data, counts


def hf_rank(args: tuple[str, int, int, list[str], bool]) -> tuple[HfRank, EpRank | None]:
    """One tp rank of transformers' native TP on the fake group: param -> (local shape,
    global offset, placements); attention module -> (local q heads, local KV heads,
    num_key_value_groups) from its TP-local projections; transformers'
    get_kv_heads_per_rank; the local data of every `_StridedShard` param and of every
    param named in `fused` (those its loader builds from other checkpoint tensors). With
    `ep`, the same process (one fork, one transformers import) also loads the checkpoint
    under transformers' expert parallelism (`hf_ep_rank`)."""
    ckpt, rank, world, fused, ep = args
    from torch.distributed.tensor import DTensor
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig
    from transformers.distributed.tensor_parallel import get_kv_heads_per_rank

    judge.fake_world(rank, world)
    model = AutoModelForCausalLM.from_pretrained(
        ckpt, distributed_config=DistributedConfig(tp_size=world))
    out = param_layouts(model)
    heads = {}
    for name, module in model.named_modules():
        counts = attention_heads(module) if hasattr(module, "num_key_value_groups") else None
        if counts is not None:
            heads[name] = (counts[0], counts[1], module.num_key_value_groups)
    kv_per_rank = get_kv_heads_per_rank(model.tp_plan, model.config.num_key_value_heads, world)
    # the rows transformers loaded for a _StridedShard param (several runs per rank) and
    # for a param it fused from per-expert tensors: its local data, compared with the rank
    # file's boxes of the checkpoint tensors
    strided = {name: (p.to_local() if isinstance(p, DTensor) else p).detach().float().tolist()
               for name, p in model.named_parameters()
               if name in fused or (isinstance(p, DTensor) and "_StridedShard" in str(p.placements))}
    return (out, heads, kv_per_rank, strided), (hf_ep_rank(ckpt, world) if ep else None)


def dump_tp_plan(ckpt: str, out: str) -> int:
    """tools/hf_tp_plan.py's main in a forked child (transformers is already loaded);
    test_moe_plan_is_refused runs the same tool as a command."""
    spec = importlib.util.spec_from_file_location("hf_tp_plan", REPO / "tools" / "hf_tp_plan.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return int(tool.main([ckpt, "-o", out]))


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("model_type", sorted(SHRUNK))
def test_transformers_tp_agrees(shardc: str, tmp_path: Path, model_type: str) -> None:
    ckpt = tmp_path / "ckpt"
    ctx = multiprocessing.get_context("fork")
    plan = tmp_path / "tp_plan.json"
    with ctx.Pool(1, maxtasksperchild=1) as pool:  # torch state stays out of this process
        pool.apply(save_tiny, (model_type, ckpt))
        assert pool.apply(dump_tp_plan, (str(ckpt), str(plan))) == 0
    recipe = tmp_path / "tp.recipe.yaml"
    res = run([shardc, "recipe", "--from-hf-tp-plan", str(plan), str(ckpt), "--tp", str(TP),
               "-o", str(recipe)])
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out"
    res = run([shardc, "compile", str(ckpt), str(recipe), "-o", str(out), "--force", "--quiet"])
    assert res.returncode == 0, res.stderr
    # the uneven vocab (130 over 4) is the only thing shardc warns about (Llama-4: also
    # that its import has no module-order table, which only FSDP2 / muon offsets read)
    codes = {d["code"] for d in json.loads((out / "plan.json").read_text())["diagnostics"]}
    allowed = {"W-VOCAB"} | ({"W-MODULE-ORDER"} if model_type == "llama4_text" else set())
    assert codes <= allowed, codes
    # params transformers' loader builds from checkpoint tensors of other names
    sources = json.loads(plan.read_text()).get("sources", {})
    fused = sorted(name for name, src in sources.items() if src["operations"])
    renamed = {name: src["parts"][0][0] for name, src in sources.items() if not src["operations"]}
    if model_type in ("mixtral", "qwen3_moe", "deepseek_v3"):
        assert fused, "the plan dump lists no fused experts"
    ep = model_type in EP_ARCHS
    if model_type == "llama4_text":  # no base_model_ep_plan: `--ep` refused, as transformers
        res = run([shardc, "recipe", "--from-hf-tp-plan", str(plan), str(ckpt), "--tp", str(TP),
                   "--ep", str(TP)])
        assert res.returncode == 2 and "has no `ep_plan`" in res.stderr, res.stderr
    if ep:  # the ep_plan too (`--ep`): compiled beside the tp-only recipe
        ep_recipe = tmp_path / "ep.recipe.yaml"
        res = run([shardc, "recipe", "--from-hf-tp-plan", str(plan), str(ckpt), "--tp", str(TP),
                   "--ep", str(TP), "-o", str(ep_recipe)])
        assert res.returncode == 0, res.stderr
        res = run([shardc, "compile", str(ckpt), str(ep_recipe), "-o", str(tmp_path / "ep_out"),
                   "--force", "--quiet"])
        assert res.returncode == 0, res.stderr
    with ctx.Pool(2, maxtasksperchild=1) as pool:
        both = pool.map(hf_rank, [(str(ckpt), r, TP, fused, ep) for r in range(TP)])
    hf = [tp_side for tp_side, _ in both]
    if ep:
        assert_ep_agrees(ckpt, tmp_path / "ep_out", json.loads(plan.read_text()),
                         [ep_side for _, ep_side in both])
    plan_json = json.loads((out / "plan.json").read_text())
    labels = {p["name"]: [t for t in p["placements"] if t != "Replicate()"]
              for p in plan_json["params"]}
    bad = []
    for rank in range(TP):
        rf = json.loads(next((out / "ranks").glob(f"rank-*{rank}.json")).read_text())
        held = {p["name"]: p for p in rf["params"]}
        params, heads, kv_per_rank, data = hf[rank]
        bad += box_mismatches(rank, ckpt, held,
                              {n: v for n, v in data.items() if n not in sources})
        bad += fused_mismatches(rank, ckpt, held, {n: sources[n] for n in fused},
                                {n: data[n] for n in fused})
        if fused and rank == TP - 1:
            # the check bites: one expert tensor's offset moved back by one on its split dim
            key = sources[fused[0]]["parts"][0][0]
            offset = list(held[key]["global_offset"])
            split = next(d for d, o in enumerate(offset) if o > 0)
            offset[split] -= 1
            moved = dict(held[key], global_offset=offset)
            caught = fused_mismatches(rank, ckpt, {**held, key: moved},
                                      {fused[0]: sources[fused[0]]}, {fused[0]: data[fused[0]]})
            assert caught and f"rank {rank}: {fused[0]}: local element" in caught[0], caught
        aliases = {n for n, p in held.items() if p.get("alias_of")}
        bad += attribute_mismatches(rank, rf["local_attributes"],
                                    {renamed.get(n, n): v for n, v in params.items()}, heads,
                                    kv_per_rank, aliases)
        unfused = {renamed.get(n, n) for n in params if n not in fused}
        assert set(held) >= unfused, unfused - set(held)
        for hf_name, (local, off, places) in params.items():
            if hf_name in fused:
                continue
            name = renamed.get(hf_name, hf_name)
            ours = held[name]
            if held[name].get("alias_of"):
                continue
            for field, a, b in (("local_shape", ours["local_shape"], local),
                                ("global_offset", ours["global_offset"], off),
                                ("placements", labels[name], places)):
                if a != b:
                    bad.append(f"rank {rank}: {name}: {field}: shardc {a}, transformers {b}")
    assert not bad, "\n".join(bad[:20])


def assert_ep_agrees(ckpt: Path, out: Path, dump: dict[str, Any], hf: list[Any]) -> None:
    """`shardc recipe --ep` against transformers' own expert parallelism, every rank: each
    param transformers holds under its own name (the dense ones by the tp rules, a
    pre-stacked expert param by its `experts` entry) has the rank file's local shape,
    offset and placements; each expert param transformers' loader fuses from per-expert
    checkpoint tensors equals, element for element, the rank file's stacked params of those
    tensors (plan.json `stacked_from`) joined by the loader's operations; its data equals the
    rank file's box of the checkpoint for a pre-stacked one; and each experts module's
    local `num_experts` (transformers' MoEParamShard) and its first expert equal the rank
    file's `local_attributes.experts` of that layer. One expert moved in a rank file is
    caught."""
    import torch

    plan = json.loads((out / "plan.json").read_text())
    by_sources = {tuple(p["stacked_from"]["sources"]): p["name"] for p in plan["params"]
                  if p.get("stacked_from")}
    labels = {p["name"]: [t for t in p["placements"] if t != "Replicate()"]
              for p in plan["params"]}
    sources = dump.get("sources", {})
    fused = {n: src for n, src in sources.items() if src["operations"]}
    renamed = {n: src["parts"][0][0] for n, src in sources.items() if not src["operations"]}
    tensors = checkpoint_tensors(ckpt)
    bad: list[str] = []

    def fused_piece(held: dict[str, Any], src: dict[str, Any]) -> Any:
        parts = []
        for keys in src["parts"]:
            stacked = by_sources.get(tuple(keys))
            if stacked is None:
                return f"no stacked param of {keys[:2]}..."
            full = torch.stack([tensors[k].float() for k in keys], dim=0)
            parts.append(rank_file_piece(held, stacked, full))
        ops = [op for op in src["operations"] if op["op"] == "Concatenate"]
        return torch.cat(parts, dim=ops[0]["dim"]) if ops else parts[0]

    for rank, (layouts, data, counts) in enumerate(hf):
        rf = json.loads(next((out / "ranks").glob(f"rank-*{rank}.json")).read_text())
        held = {p["name"]: p for p in rf["params"]}
        for hf_name, (local, off, places) in layouts.items():
            if hf_name in fused:
                got = fused_piece(held, fused[hf_name])
                want = torch.tensor(data[hf_name])
                if isinstance(got, str) or got.shape != want.shape or not torch.equal(got, want):
                    bad.append(f"rank {rank}: {hf_name}: the rank file's stacked experts "
                               f"{got if isinstance(got, str) else list(got.shape)} are not the "
                               f"experts transformers loaded {list(want.shape)}")
                if rank == len(hf) - 1 and not isinstance(got, str):  # the check bites
                    first = by_sources[tuple(fused[hf_name]["parts"][0])]
                    moved = dict(held[first], global_offset=[held[first]["global_offset"][0] - 1]
                                 + held[first]["global_offset"][1:])
                    assert not torch.equal(fused_piece({**held, first: moved}, fused[hf_name]),
                                           want), hf_name
                continue
            name = renamed.get(hf_name, hf_name)
            ours = held.get(name)
            if ours is None:
                bad.append(f"rank {rank}: {name}: not in the rank file")
                continue
            if ours.get("alias_of"):
                continue
            for field, a, b in (("local_shape", ours["local_shape"], local),
                                ("global_offset", ours["global_offset"], off),
                                ("placements", labels[name], places)):
                if a != b:
                    bad.append(f"rank {rank}: {name}: {field}: shardc {a}, transformers {b}")
            if hf_name in data:  # a pre-stacked expert param: its rows
                got = rank_file_piece(held, name, tensors[name].float())
                if not torch.equal(got, torch.tensor(data[hf_name])):
                    bad.append(f"rank {rank}: {name}: the rank file's box is not the experts "
                               "transformers loaded")
        # local attributes: per layer, the local expert count and the first expert
        ours_experts = {}
        for module, e in rf["local_attributes"]["experts"].items():
            layer = int(module.split("layers.")[1].split(".")[0])
            ours_experts[layer] = (e["local_experts"], e["expert_range"][0])
        theirs = {}
        for module, count in counts.items():
            layer = int(module.split("layers.")[1].split(".")[0])
            first = next(off[0] for n, (_, off, _) in layouts.items()
                         if n.startswith(module + "."))
            theirs[layer] = (count, first)
        if ours_experts != theirs:
            bad.append(f"rank {rank}: (local experts, first expert) per MoE layer: shardc "
                       f"{ours_experts}, transformers {theirs}")
    print(f"EP judged: {len(hf)} ranks, {len(fused)} fused expert params, "
          f"{sum(len(d) for _, d, _ in hf)} expert tensors' data, layers {sorted(theirs)}")
    assert not bad, "\n".join(bad[:20])


def rank_file_piece(held: dict[str, Any], name: str, full: Any) -> Any:
    """A rank's piece of checkpoint tensor `name` as the rank file states it: its boxes
    (several runs) or its one box (local shape at the global offset)."""
    import torch

    ours = held[name]
    got = torch.zeros(ours["local_shape"])
    boxes = ours.get("boxes") or [{"global_offset": ours["global_offset"],
                                   "local_offset": [0] * len(ours["local_shape"]),
                                   "shape": ours["local_shape"]}]
    for b in boxes:
        src = tuple(slice(o, o + n) for o, n in zip(b["global_offset"], b["shape"]))
        dst = tuple(slice(o, o + n) for o, n in zip(b["local_offset"], b["shape"]))
        got[dst] = full[src]
    return got


def checkpoint_tensors(ckpt: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    tensors: dict[str, Any] = {}
    for f in sorted(ckpt.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return tensors


def fused_mismatches(rank: int, ckpt: Path, held: dict[str, Any], sources: dict[str, Any],
                     local: dict[str, list[Any]]) -> list[str]:
    """Each param transformers fused from checkpoint tensors: the rank file's pieces of
    those tensors, put together by the loader's own operations (MergeModulelist stacks
    each part's tensors on a new dim, Concatenate joins the parts), must be exactly the
    local tensor transformers loaded on this rank."""
    import torch

    tensors = checkpoint_tensors(ckpt)
    bad = []
    for name, src in sources.items():
        missing = [k for part in src["parts"] for k in part if k not in held]
        if missing:
            bad.append(f"rank {rank}: {name}: the rank file has no {missing[:3]}")
            continue
        parts = [[rank_file_piece(held, k, tensors[k].float()) for k in part]
                 for part in src["parts"]]
        pieces: list[Any] = []
        for op in src["operations"]:
            if op["op"] == "MergeModulelist":
                pieces = [torch.stack(part, dim=op["dim"]) for part in parts]
            elif op["op"] == "Concatenate":
                pieces = [torch.cat(pieces, dim=op["dim"])]
            else:
                bad.append(f"{name}: operation {op} is not one this test assembles")
        want = torch.tensor(local[name])
        if len(pieces) == 1 and pieces[0].shape == want.shape:
            if not torch.equal(pieces[0], want):
                at = [int(i) for i in (pieces[0] != want).nonzero()[0]]
                bad.append(f"rank {rank}: {name}: local element {at}: shardc's boxes give "
                           f"{float(pieces[0][tuple(at)])}, transformers loaded "
                           f"{float(want[tuple(at)])}")
        else:
            bad.append(f"rank {rank}: {name}: local shape: shardc's boxes assembled "
                       f"{[list(x.shape) for x in pieces]}, transformers {list(want.shape)}")
    return bad


def box_mismatches(rank: int, ckpt: Path, held: dict[str, Any],
                   strided: dict[str, list[Any]]) -> list[str]:
    """Each `_StridedShard` param transformers loaded: the rank file's boxes of the
    checkpoint tensor, concatenated in local order, must be the rows transformers holds."""
    import torch
    from safetensors.torch import load_file

    tensors: dict[str, Any] = {}
    for f in sorted(ckpt.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    bad = []
    for name, local in strided.items():
        boxes = held[name].get("boxes")
        if not boxes:
            bad.append(f"rank {rank}: {name}: transformers holds _StridedShard rows, the rank "
                       "file lists no boxes")
            continue
        full = tensors[name].float()
        got = torch.zeros(held[name]["local_shape"])
        for b in boxes:
            src = tuple(slice(o, o + n) for o, n in zip(b["global_offset"], b["shape"]))
            dst = tuple(slice(o, o + n) for o, n in zip(b["local_offset"], b["shape"]))
            got[dst] = full[src]
        if not torch.equal(got, torch.tensor(local)):
            bad.append(f"rank {rank}: {name}: the rank file's boxes {boxes} are not the rows "
                       "transformers loaded")
    return bad


def attribute_mismatches(rank: int, attributes: dict[str, Any],
                         params: dict[str, tuple[list[int], list[int], list[str]]],
                         heads: dict[str, tuple[int, int, int]], kv_per_rank: Any,
                         aliases: set[str]) -> list[str]:
    """The rank file's local attributes against transformers' TP on one rank (a tied
    alias is no param of transformers' own: its source is compared)."""
    bad = []
    ours = attributes["attention"]
    if set(ours) != set(heads):
        bad.append(f"rank {rank}: attention modules: shardc {sorted(ours)}, transformers "
                   f"{sorted(heads)}")
    for module, (q, kv, groups) in heads.items():
        got = ours.get(module)
        if got is None:
            continue
        used = got["kv_head_range_used"][1] - got["kv_head_range_used"][0]
        for field, a, b in (("q_heads", got["q_heads"], q), ("kv_heads", got["kv_heads"], kv),
                            ("kv_heads (get_kv_heads_per_rank)", got["kv_heads"], kv_per_rank),
                            ("q heads per KV head (num_key_value_groups)",
                             got["q_heads"] // max(used, 1), groups)):
            if a != b:
                bad.append(f"rank {rank}: {module}: {field}: shardc {a}, transformers {b}")
    for name, vocab in attributes["vocab"].items():
        if name in aliases:
            continue
        local, off, _ = params[name]
        want = [off[0], off[0] + local[0]] if local[0] else [vocab["vocab_size"]] * 2
        if vocab["token_range"] != want:
            bad.append(f"rank {rank}: {name}: token_range: shardc {vocab['token_range']}, "
                       f"transformers' DTensor {want}")
    if not heads:
        bad.append(f"rank {rank}: transformers' model has no attention module to compare")
    return bad


def test_mixtral_checkpoint_layout(shardc: str, tmp_path: Path) -> None:
    """Mixtral-8x7B's own checkpoint layout (every expert apart, under block_sparse_moe) at
    tp 8: the plan dumped from the checkpoint directory translates, each expert's w1 and w3
    is Shard(0) and its w2 Shard(1), one rule each; a plan dumped from the config.json
    alone (no `sources`) is refused, naming the fused param and the reason."""
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    import checkpoint_util as cu

    name = "Mixtral-8x7B-v0.1"
    ckpt = tmp_path / "ckpt"
    cu.write_checkpoint(cu.load_inventory(name), cu.load_config(name), ckpt)
    plan = tmp_path / "tp_plan.json"
    res = run([sys.executable, str(REPO / "tools" / "hf_tp_plan.py"), str(ckpt), "-o", str(plan)])
    assert res.returncode == 0, res.stderr
    recipe = tmp_path / "tp.recipe.yaml"
    res = run([shardc, "recipe", "--from-hf-tp-plan", str(plan), str(ckpt), "--tp", "8",
               "-o", str(recipe)])
    assert res.returncode == 0, res.stdout + res.stderr
    text = recipe.read_text()
    for leaf, placement in (("w1", "Shard(0)"), ("w3", "Shard(0)"), ("w2", "Shard(1)")):
        rule = (f'"model.layers.*.block_sparse_moe.experts.*.{leaf}.weight"')
        assert text.count(rule) == 1, text
        assert f'{rule}    # ' in text and f'placements: {{tp: "{placement}"}}' in text, text
    assert "moe_tp_experts hooks the module's forward" in text, text
    out = tmp_path / "out"
    res = run([shardc, "compile", str(ckpt), str(recipe), "-o", str(out), "--force", "--quiet"])
    assert res.returncode == 0, res.stderr
    params = {p["name"]: p for p in json.loads((out / "plan.json").read_text())["params"]}
    experts = [n for n in params if ".experts." in n]
    assert len(experts) == 32 * 8 * 3, len(experts)
    for n in experts:
        want = ["Shard(1)"] if n.endswith(".w2.weight") else ["Shard(0)"]
        assert [t for t in params[n]["placements"] if t != "Replicate()"] == want, (n, params[n])
    # the config alone: transformers' conversion of the checkpoint's tensors is unknown
    bare = tmp_path / "bare_plan.json"
    res = run([sys.executable, str(REPO / "tools" / "hf_tp_plan.py"), str(ckpt / "config.json"),
               "-o", str(bare)])
    assert res.returncode == 0, res.stderr
    assert "sources" not in json.loads(bare.read_text())
    res = run([shardc, "recipe", "--from-hf-tp-plan", str(bare), str(ckpt), "--tp", "8"])
    assert res.returncode == 2, res.stdout + res.stderr
    assert ("E-HF-TP-PLAN" in res.stderr and "experts.gate_up_proj" in res.stderr
            and "sources" in res.stderr), res.stderr
