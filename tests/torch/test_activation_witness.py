"""Activation memory witness (issue 26 item 3): the bytes autograd keeps on the real module.

For every architecture in tests/data/models, the Hugging Face module is built from its
config shrunk in layers and width (same structure: GQA ratio, MoE routing, MLA ranks,
norms), in bfloat16 on the CPU. One forward with labels (transformers' own loss) runs
under `torch.autograd.graph.saved_tensors_hooks` that records every saved tensor's
storage (deduplicated by storage, parameters excluded); the logits the model returns
are added (the caller holds them until backward). Then backward runs, so the graph is
a real training graph. shardc's figure for the same shape comes from
`shardc memory --format json` on a model description written from the module's
`named_parameters()` and the shrunk config's attributes, on one rank (tp 1, pp 1).

Each (architecture, attention, recompute) row must agree within 10 %; the test prints
the table. Recompute full uses transformers' gradient checkpointing (reentrant
torch.utils.checkpoint, which saves each layer's input through the hooks).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")  # the suite runs on .venv (SHARDC_TORCH_PYTHON)
transformers = pytest.importorskip("transformers")

SEQ = 64
BATCH = 2
TOLERANCE = 0.10

# Shrunk configs: same config class and structure as tests/data/models' architectures.
COMMON: dict[str, Any] = {"vocab_size": 512, "max_position_embeddings": 256}
ARCHS: dict[str, tuple[str, dict[str, Any]]] = {
    "Llama-3.1-8B": ("LlamaConfig", {"hidden_size": 128, "intermediate_size": 448,
                                      "num_hidden_layers": 2, "num_attention_heads": 8,
                                      "num_key_value_heads": 2}),
    "Qwen2.5-0.5B": ("Qwen2Config", {"hidden_size": 112, "intermediate_size": 608,
                                      "num_hidden_layers": 2, "num_attention_heads": 7,
                                      "num_key_value_heads": 1, "tie_word_embeddings": True}),
    "gemma-2-2b": ("Gemma2Config", {"hidden_size": 144, "intermediate_size": 576,
                                     "num_hidden_layers": 2, "num_attention_heads": 4,
                                     "num_key_value_heads": 2, "head_dim": 64}),
    "gpt2": ("GPT2Config", {"n_embd": 96, "n_layer": 2, "n_head": 4, "n_positions": 256,
                             "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}),
    "Mixtral-8x7B-v0.1": ("MixtralConfig", {"hidden_size": 128, "intermediate_size": 448,
                                             "num_hidden_layers": 2, "num_attention_heads": 8,
                                             "num_key_value_heads": 2, "num_local_experts": 4,
                                             "num_experts_per_tok": 2}),
    "Qwen3-30B-A3B": ("Qwen3MoeConfig", {"hidden_size": 128, "intermediate_size": 384,
                                          "moe_intermediate_size": 96, "num_hidden_layers": 2,
                                          "num_attention_heads": 8, "num_key_value_heads": 2,
                                          "head_dim": 32, "num_experts": 8,
                                          "num_experts_per_tok": 2}),
    "DeepSeek-V3": ("DeepseekV3Config", {"hidden_size": 128, "intermediate_size": 384,
                                          "moe_intermediate_size": 64, "num_hidden_layers": 2,
                                          "num_attention_heads": 8, "num_key_value_heads": 8,
                                          "q_lora_rank": 48, "kv_lora_rank": 32,
                                          "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
                                          "v_head_dim": 32, "n_routed_experts": 8,
                                          "num_experts_per_tok": 2, "n_shared_experts": 1,
                                          "n_group": 1, "topk_group": 1,
                                          "first_k_dense_replace": 1}),
}
# The architectures of tests/data/models covered by a row above (the same config class).
SAME_AS = {"Llama-3.1-70B": "Llama-3.1-8B", "Llama-3.1-405B": "Llama-3.1-8B",
           "megatron-llama-3-70b": "Llama-3.1-8B", "torchtitan-llama3-8B": "Llama-3.1-8B",
           "Qwen3-235B-A22B": "Qwen3-30B-A3B", "torchtitan-deepseek_v3-16B": "DeepSeek-V3"}

ATTR_KEYS = ["hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
             "intermediate_size", "moe_intermediate_size", "num_hidden_layers", "vocab_size",
             "num_experts_per_tok", "n_shared_experts", "q_lora_rank", "kv_lora_rank",
             "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "first_k_dense_replace"]
ROWS: list[tuple[str, str, str, int, int, float]] = []


def build(arch: str, attention: str) -> Any:
    cls_name, sizes = ARCHS[arch]
    cfg = getattr(transformers, cls_name)(**{**COMMON, **sizes})
    cfg._attn_implementation = attention
    cfg.use_cache = False  # training: no KV cache (its torch.cat copies would be saved)
    if hasattr(cfg, "_experts_implementation"):
        cfg._experts_implementation = "eager"  # the per-expert loop shardc's MoE terms follow
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.train()
    return model


def attributes(cfg: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in ATTR_KEYS:
        value = getattr(cfg, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value > 0:
            out["num_experts"] = value
    if "hidden_size" not in out:  # GPT-2
        out.update({"hidden_size": cfg.n_embd, "num_attention_heads": cfg.n_head,
                    "num_hidden_layers": cfg.n_layer})
    return out


def measured_bytes(model: Any, recompute: str) -> int:
    """Bytes of the storages autograd saves in one forward, plus the returned logits."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    params |= {b.untyped_storage().data_ptr() for b in model.buffers()}
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            st = t.untyped_storage()
            if st.data_ptr() not in params and st.nbytes() > 0:
                saved[st.data_ptr()] = st.nbytes()
        return t

    if recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids)
    logits = out.logits.untyped_storage()
    saved.setdefault(logits.data_ptr(), logits.nbytes())
    out.loss.backward()
    return sum(saved.values())


def model_yaml(model: Any, arch: str) -> str:
    lines = ["format: shardc.model/v1", f"name: {arch}-witness", "dtype: bfloat16",
             "attributes:"]
    for key, value in attributes(model.config).items():
        lines.append(f"  {key}: {value}")
    lines.append("params:")
    for name, p in model.named_parameters():
        lines.append(f"  - {{name: {name}, shape: {list(p.shape)}}}")
    return "\n".join(lines) + "\n"


def recipe_yaml(attention: str, recompute: str) -> str:
    return (
        "format: shardc.recipe/v1\n"
        "mesh:\n  - {name: dp, size: 1}\n"
        "rules:\n  - match: \"**\"\n    placements: {}\n"
        "training:\n"
        f"  seq_len: {SEQ}\n  micro_batch_size: {BATCH}\n"
        f"  attention: {attention}\n  recompute: {recompute}\n"
        "  activation_dtype: bfloat16\n")


def shardc_bytes(shardc: str, tmp: Path, model: Any, arch: str, attention: str,
                 recompute: str) -> int:
    (tmp / "model.yaml").write_text(model_yaml(model, arch))
    (tmp / "recipe.yaml").write_text(recipe_yaml(attention, recompute))
    run = subprocess.run([shardc, "memory", str(tmp / "model.yaml"), str(tmp / "recipe.yaml"),
                          "--format", "json"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert "activations" in report, "shardc did not count activations: " + run.stdout[:400]
    # The saved tensors of one micro-batch's forward: the stage's per-micro-batch terms
    # (the `once` term, the layer recomputed during backward under `full`, is alive only
    # in backward and not seen by the pack hook).
    return int(report["activations"][0]["per_microbatch_bytes"])


# Rows that cannot run on the CPU module, with the reason (the report lists them):
NOT_RUN = {
    ("gemma-2-2b", "sdpa"): "transformers 5.24 refuses sdpa for Gemma2ForCausalLM "
                            "(_sdpa_can_dispatch); eager is its training path here",
    ("DeepSeek-V3", "sdpa"): "d_qk (nope + rope) != d_v: torch's CPU flash kernel does not "
                             "apply and SDPA falls back to the math path, which saves fp32 "
                             "q, k, v and s x s scores (a CPU artifact; CUDA flash / "
                             "efficient kernels do not); eager is witnessed",
}
CASES = [(arch, attention, recompute) for arch in ARCHS for attention in ("sdpa", "eager")
         for recompute in ("none", "full") if (arch, attention) not in NOT_RUN]


@pytest.fixture(scope="module", autouse=True)
def table() -> Any:
    """Prints the witness table after the module's tests (CTest shows it with -s)."""
    yield
    lines = ["", "architecture         attn   recomp torch_bytes shardc_bytes gap"]
    for arch, attention, recompute, truth, ours, gap in ROWS:
        lines.append(f"{arch:20} {attention:6} {recompute:6} {truth:>11} {ours:>12} {gap:+.1%}")
    for (arch, attention), why in NOT_RUN.items():
        lines.append(f"{arch:20} {attention:6} not run: {why}")
    print("\n".join(lines))


@pytest.mark.parametrize("arch,attention,recompute", CASES,
                         ids=[f"{a}-{b}-{c}" for a, b, c in CASES])
def test_activation_witness(shardc: str, tmp_path: Path, arch: str, attention: str,
                            recompute: str) -> None:
    torch.set_num_threads(1)
    model = build(arch, attention)
    truth = measured_bytes(model, recompute)
    ours = shardc_bytes(shardc, tmp_path, model, arch, attention, recompute)
    gap = (ours - truth) / truth
    ROWS.append((arch, attention, recompute, truth, ours, gap))
    print(f"\n{arch:20} {attention:6} {recompute:5} torch {truth:>10} shardc {ours:>10} "
          f"gap {gap:+.1%}")
    assert abs(gap) <= TOLERANCE, f"{arch} {attention} {recompute}: shardc {ours} vs torch {truth}"


# Architectures whose witness row is still to be written (issue 26 stays open until it is):
# the pre-stacked-expert models added with issue 27 (gpt-oss: attention sinks and interleaved
# gate/up experts; Llama-4: chunked attention and a vision tower). Listed, not skipped
# silently: the test below fails on any other architecture without a row, and on a listed one
# that has gained a row.
PENDING = {"gpt-oss-120b": "pre-stacked experts and attention sinks: no activation terms yet",
           "Llama-4-Scout-17B-16E": "pre-stacked experts, chunked attention: no terms yet"}


def test_every_architecture_has_a_row() -> None:
    data = Path(__file__).resolve().parent.parent / "data" / "models"
    names = {p.name.split(".params.json")[0] for p in data.glob("*.params.json*")}
    missing = sorted(n for n in names if n not in ARCHS and n not in SAME_AS and n not in PENDING)
    assert not missing, f"tests/data/models architectures without a witness row: {missing}"
    stale = sorted(n for n in PENDING if n in ARCHS or n in SAME_AS or n not in names)
    assert not stale, f"PENDING names an architecture that has a row or no inventory: {stale}"
