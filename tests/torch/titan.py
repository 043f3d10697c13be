"""torchtitan parallelizes its own models on the fake process group, one rank at a time.

torchtitan 0.3.0 (pinned in tools/python/requirements-nodeps.txt, installed with
--no-deps) beside torch 2.13.0. For one `Setting` (a model flavor from torchtitan's own
registry, `torchtitan/models/<family>/__init__.py:model_registry`, and the parallel
degrees of its `ParallelismConfig`) and one global rank, `parallelize_rank` does what
torchtitan's `Trainer.__init__` (`torchtitan/trainer.py`) does up to the weights' init:

* `init_process_group("fake", rank=r, world_size=N)` (torchtitan's own dry run,
  `torchtitan/distributed/utils.py:init_fake_mode`, uses the same backend);
* `model_config.update_from_config(config=...)` (sets the sharding config), the model on
  the meta device, `ParallelDims.from_config(parallelism, N)`;
* `model_spec.parallelize_fn` (`parallelize_llama`, `parallelize_deepseekv3`: TP, EP,
  FSDP/HSDP by `apply_fsdp_to_decoder` / `apply_fsdp_to_mtp_decoder`), or with pp > 1
  `model_spec.pipelining_fn` (`pipeline_llm`: the stage split, then parallelize_fn on each
  stage);

then dumps every parameter it holds with `dump_model.sharded_layout` and every FSDP2
all-gather group with `dump_model.fsdp_units`.

What runs differently from a GPU dry run, and why (docs/torchtitan.md):

* `torchtitan.distributed.minimal_async_ep.kernels` (Triton kernels of the GPU-only
  symmetric-memory EP backend) is replaced by a module whose functions raise: it is
  imported by `models/common/token_dispatcher.py` whatever the backend, and is the only
  import of `triton` (1 GB) on this path; nothing of it runs on the CPU (the default
  `moe_comm_backend` is all-to-all, and no forward runs here).
* `torchtitan.trainer` (the training loop: tensorboard, torchdata, wandb) is replaced by
  a module whose `Trainer.Config` matches nothing: `Decoder.Config.update_from_config`
  imports it only for an `isinstance` check and then skips the trainer-only part (RoPE
  length from `training.seq_len`, debug flags), as its docstring says for callers that
  are not the trainer. Param shapes and shardings do not depend on it.
* `torchtitan.tools.utils.device_type` is "cuda" when no accelerator exists
  (`get_device_info`), so FSDP2 would call `torch.cuda.current_device()` on a CPU build:
  it is set to "cpu" before torchtitan's modules read it.
* The default `parallelism.spmd_backend`, `spmd_types`, fails in torch 2.13's
  `fully_shard` (plain local tensors with `spmd_types` annotations plus
  `DataParallelMeshDims`: "When dp_mesh_dims is provided, all parameters must be
  DTensors on the full SPMD mesh"; torchtitan 0.3 expects a newer PyTorch nightly): the
  settings run `partial_dtensor` (TP/EP DTensors, FSDP on the flattened `fsdp` mesh) and
  `full_dtensor` (DTensors on the full mesh); `SPMD_TYPES_ERROR` pins the failure.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from model_files import load_dump_model, write_model_files

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

SPMD_TYPES_ERROR = "When dp_mesh_dims is provided, all parameters must be DTensors"

_MINIMAL_ASYNC_EP_KERNELS = [
    "copy_full_counts_to_peers_kernel", "copy_rows_to_peers_kernel",
    "expand_topk_grad_kernel", "fill_combine_metadata_kernel",
    "fill_dispatch_metadata_kernel", "invert_flat_indices_kernel",
    "reduce_topk_slots_kernel", "topk_scores_grad_kernel",
]


def install_shims() -> None:
    """The three CPU-path replacements named in the module docstring. Idempotent."""
    name = "torchtitan.distributed.minimal_async_ep.kernels"
    if name not in sys.modules:
        kernels = types.ModuleType(name, "Triton kernels of MinimalAsyncEP: GPU only, "
                                   "replaced on the CPU (tests/torch/titan.py)")

        def gpu_only(*_args: Any, **_kwargs: Any) -> None:
            raise RuntimeError(f"{name}: Triton kernels run on a GPU only")

        for kernel in _MINIMAL_ASYNC_EP_KERNELS:
            setattr(kernels, kernel, gpu_only)
        sys.modules[name] = kernels
    if "torchtitan.trainer" not in sys.modules:
        trainer = types.ModuleType("torchtitan.trainer", "the training loop, not imported "
                                   "on the CPU (tests/torch/titan.py)")

        class Trainer:
            class Config:  # an isinstance target nothing here is an instance of
                pass

        trainer.Trainer = Trainer  # type: ignore[attr-defined]
        sys.modules["torchtitan.trainer"] = trainer
    import torch
    import torchtitan.tools.utils as titan_utils

    titan_utils.device_type, titan_utils.device_module = "cpu", torch.cpu


@dataclasses.dataclass(frozen=True)
class Setting:
    """One torchtitan run: the model (family, flavor of its registry) and the degrees of
    `ParallelismConfig` (the TOML/CLI keys `parallelism.<field>`)."""

    name: str  # the recipe is plans/<name>.recipe.yaml
    family: str  # torchtitan.models.<family>
    flavor: str  # key of <family>_configs
    world: int
    dp_shard: int = -1  # data_parallel_shard_degree (-1: the rest of the world)
    dp_replicate: int = 1  # data_parallel_replicate_degree
    tp: int = 1  # tensor_parallel_degree
    pp: int = 1  # pipeline_parallel_degree
    ep: int = 1  # expert_parallel_degree
    backend: str = "partial_dtensor"  # spmd_backend
    schedule: str = "1F1B"  # pipeline_parallel_schedule

    @property
    def model_name(self) -> str:
        return f"torchtitan-{self.family}-{self.flavor.lower()}"

    def parallelism(self) -> Any:
        from torchtitan.config import ParallelismConfig

        return ParallelismConfig(
            data_parallel_shard_degree=self.dp_shard,
            data_parallel_replicate_degree=self.dp_replicate,
            tensor_parallel_degree=self.tp, pipeline_parallel_degree=self.pp,
            expert_parallel_degree=self.ep, spmd_backend=self.backend,  # type: ignore[arg-type]
            pipeline_parallel_schedule=self.schedule)


def model_spec(family: str, flavor: str) -> Any:
    install_shims()
    module = importlib.import_module(f"torchtitan.models.{family}")
    return module.model_registry(flavor)


def build_model(family: str, flavor: str, parallelism: Any = None) -> tuple[Any, Any]:
    """torchtitan's model on the meta device, as `Trainer.__init__` builds it."""
    import torch
    from torchtitan.config import ParallelismConfig

    spec = model_spec(family, flavor)
    config = types.SimpleNamespace(parallelism=parallelism or ParallelismConfig())
    spec.model.update_from_config(config=config)
    with torch.device("meta"):
        model = spec.model.build()
    return spec, model


def parallelize_rank(setting: Setting, rank: int) -> dict[str, list[dict[str, Any]]]:
    """Rank `rank` of `setting` parallelized by torchtitan: `params`, the
    `dump_model.sharded_layout` of every model part it holds (with pp, the rank's stage
    only), and `units`, their `dump_model.fsdp_units`."""
    import torch
    import judge
    from torchtitan.config import CompileConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims

    judge.fake_world(rank, setting.world)
    parallelism = setting.parallelism()
    spec, model = build_model(setting.family, setting.flavor, parallelism)
    dims = ParallelDims.from_config(parallelism, setting.world)
    kwargs = dict(parallel_dims=dims, training=TrainingConfig(), parallelism=parallelism,
                  compile_config=CompileConfig(), ac_config=None,
                  dump_folder=os.environ.get("TMPDIR", "/tmp"))
    if setting.pp > 1:
        _, parts, _, _ = spec.pipelining_fn(model, device=torch.device("cpu"),
                                            model_config=spec.model,
                                            parallelize_fn=spec.parallelize_fn, loss_fn=None,
                                            **kwargs)
    else:
        parts = [spec.parallelize_fn(model, **kwargs)]
    dump = load_dump_model()
    out: dict[str, list[dict[str, Any]]] = {"params": [], "units": []}
    for part in parts:
        out["params"].extend(dump.sharded_layout(part))
        out["units"].extend(dump.fsdp_units(part))
    return out


def _in_child(args: tuple[Setting, int]) -> tuple[int, dict[str, Any] | str]:
    import torch.distributed as dist

    import torch

    # A forked child must not enter the parent's OpenMP team: libgomp is not fork-safe once
    # the parent ran a parallel region (a big torch.arange is one), and the child then
    # waits forever in gomp_team_barrier_wait_end. One thread runs ops inline.
    torch.set_num_threads(1)
    setting, rank = args
    try:
        return rank, parallelize_rank(setting, rank)
    except Exception as exc:  # noqa: BLE001 - reported by the test with the rank
        return rank, f"{type(exc).__name__}: {exc}"
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def parallelize_ranks(setting: Setting, ranks: Sequence[int],
                      workers: int = 2) -> dict[int, dict[str, Any] | str]:
    """Each rank in a fresh forked process (one process is one rank: judge.py explains
    why DTensor needs that). A rank whose run raised maps to the error text."""
    import multiprocessing

    install_shims()
    importlib.import_module(f"torchtitan.models.{setting.family}")  # once, before forking
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(processes=max(1, min(workers, len(ranks))), maxtasksperchild=1) as pool:
        return dict(pool.map(_in_child, [(setting, r) for r in ranks], chunksize=1))


# --- the shardc model of a torchtitan model ---------------------------------------------

# torchtitan's GroupedExperts hold [E, ...] weights; shardc's model lists experts one by
# one and its recipe stacks them back (contract §5.4), as a checkpoint does.
EXPERT_PARAM = ".moe.routed_experts.inner_experts."


def shardc_inventory(family: str, flavor: str) -> dict[str, Any]:
    """`dump_model.inventory` of torchtitan's module (its FQNs, shapes, dtypes, order),
    with each grouped-experts weight `<m>.inner_experts.<w>` [E, ...] listed as E
    sources `<m>.inner_experts.<e>.<w>`, so the recipe's `experts` entry restacks it."""
    _, model = build_model(family, flavor)
    inv = load_dump_model().inventory(model, f"torchtitan-{family}-{flavor}")
    params: list[dict[str, Any]] = []
    for p in inv["params"]:
        if EXPERT_PARAM not in p["name"]:
            params.append(p)
            continue
        head, leaf = p["name"].rsplit(".", 1)
        for e in range(p["shape"][0]):
            params.append({**p, "name": f"{head}.{e}.{leaf}", "shape": p["shape"][1:]})
    inv["params"] = params
    return inv


def attributes(family: str, flavor: str) -> dict[str, Any]:
    """The shardc model attributes (contract §3) read from torchtitan's model config: the
    head counts shardc's E-HEADS check needs, widths, and the expert count."""
    spec = model_spec(family, flavor)
    cfg = spec.model
    attention = cfg.layers[0].attention
    n_heads = attention.n_heads
    out: dict[str, Any] = {"num_attention_heads": n_heads,
                           "num_key_value_heads": getattr(attention, "n_kv_heads", None) or n_heads,
                           "hidden_size": cfg.dim, "num_hidden_layers": len(cfg.layers),
                           "vocab_size": cfg.vocab_size,
                           "tie_word_embeddings": bool(cfg.enable_weight_tying)}
    # The sizes the activation and communication models read (config.json names, as
    # `shardc import` writes them for Hugging Face models): the dense MLP width, the
    # head width, MLA's ranks and widths, the routed experts' width, top-k and shared
    # experts, the leading dense layers.
    qkv = getattr(attention, "qkv_linear", None)
    if getattr(qkv, "head_dim", None):
        out["head_dim"] = qkv.head_dim
    dense = [layer for layer in cfg.layers if getattr(layer, "feed_forward", None) is not None]
    if dense:
        out["intermediate_size"] = dense[0].feed_forward.w1.out_features
    if getattr(attention, "kv_lora_rank", None):
        if attention.q_lora_rank:
            out["q_lora_rank"] = attention.q_lora_rank
        for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            out[key] = getattr(attention, key)
    for index, layer in enumerate(cfg.layers):
        moe = getattr(layer, "moe", None)
        if moe is not None:
            out["num_experts"] = moe.num_experts
            width = moe.routed_experts.inner_experts.hidden_dim
            out["moe_intermediate_size"] = width
            out["num_experts_per_tok"] = moe.routed_experts.token_dispatcher.top_k
            shared = getattr(moe, "shared_experts", None)
            out["n_shared_experts"] = shared.w1.out_features // width if shared else 0
            out["first_k_dense_replace"] = index
            break
    return out


def main(argv: list[str]) -> int:
    """`titan.py FAMILY FLAVOR`: writes the inventory of a torchtitan flavor (with its
    `attributes`) to tests/data/models/torchtitan-<family>-<flavor>.params.json and its
    compact model to plans/torchtitan-<family>-<flavor lower>.model.yaml (`shardc import`,
    $SHARDC or build/test/shardc)."""
    family, flavor = argv
    inv = shardc_inventory(family, flavor)
    inv["attributes"] = attributes(family, flavor)
    inv["param_count"] = sum(math.prod(p["shape"]) for p in inv["params"])
    src = REPO / "tests" / "data" / "models" / f"{inv['model']}.params.json"
    out = REPO / "plans" / f"torchtitan-{family}-{flavor.lower()}.model.yaml"
    note = [f"# torchtitan 0.3.0's module (torchtitan.models.{family}, flavor {flavor!r}) on the "
            "meta device, dumped", "# by tools/dump_model.py's inventory (named_parameters() "
            "order); grouped experts listed one", "# by one; attributes from torchtitan's model "
            f"config. Regenerate: .venv/bin/python tests/torch/titan.py {family} {flavor}"]
    return write_model_files(inv, src, out, note)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main(sys.argv[1:]))
