"""Writes the small checkpoints of this folder into the current directory: the
silent-acceptance findings of the first-user trial (notes s11 trial A, 1.1, 1.2, 1.3, 1.5,
2.5) reduced to a few tensors each. Run: python3 make_checkpoints.py (run_report.py runs it in
a temporary folder: `generate` in expect.json)."""
import json, os, sys
sys.dont_write_bytecode = True  # no __pycache__ in the case folders
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import_quirks"))
import ckptlib  # noqa: E402
from ckptlib import write_ckpt, write_file  # noqa: E402

ckptlib.SIZES.update({"U16": 2, "U32": 4, "U64": 8, "F8_E8M0": 1})
L = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
     "num_key_value_heads": 2, "vocab_size": 16, "num_hidden_layers": 2}


def block(i):
    p = "model.layers.%d." % i
    return [(p + "self_attn.q_proj.weight", "BF16", [8, 8]), (p + "mlp.up_proj.weight", "BF16", [16, 8]),
            (p + "input_layernorm.weight", "BF16", [8])]


BODY = [("model.embed_tokens.weight", "BF16", [16, 8]), ("model.norm.weight", "BF16", [8])] + block(0) + block(1)
HEAD = [("lm_head.weight", "BF16", [16, 8])]

# 1.1: no tie_word_embeddings; LlamaConfig's default is false: the stored head is its own param
write_ckpt("m_llama_no_tie_key", L, {"model.safetensors": BODY + HEAD}, index=None)
# a model type shardc does not know the default of: tied iff no lm_head.weight is stored
OTHER = dict(L, architectures=["FooForCausalLM"], model_type="foo")
write_ckpt("m_other_no_tie_key_head", OTHER, {"model.safetensors": BODY + HEAD}, index=None)
write_ckpt("m_other_no_tie_key", OTHER, {"model.safetensors": BODY}, index=None)
# a tied config (stated, or Gemma's default) with a stored head: the head is discarded
write_ckpt("m_tied_with_head", dict(L, tie_word_embeddings=True), {"model.safetensors": BODY + HEAD}, index=None)
# 1.2: a tensor a shard holds but the index does not list: kept (transformers loads it)
write_ckpt("m_unlisted", dict(L, tie_word_embeddings=True),
           {"model-00001-of-00002.safetensors": BODY[:4], "model-00002-of-00002.safetensors": BODY[4:]},
           index={n: f for f, ts in {"model-00001-of-00002.safetensors": BODY[:4],
                                     "model-00002-of-00002.safetensors": BODY[4:]}.items()
                  for n, _, _ in ts if n != "model.norm.weight"})
# 1.5: no index, model.safetensors beside a Mistral-format consolidated.safetensors
write_ckpt("m_consolidated", dict(L, tie_word_embeddings=True), {"model.safetensors": BODY}, index=None)
write_file("m_consolidated/consolidated.safetensors",
           [("tok_embeddings.weight", "BF16", [16, 8]), ("output.weight", "BF16", [16, 8])])
# 1.3: config.json counts that disagree with the tensors
write_ckpt("m_vocab_wrong", dict(L, tie_word_embeddings=True, vocab_size=32), {"model.safetensors": BODY}, index=None)
write_ckpt("m_layers_wrong", dict(L, tie_word_embeddings=True, num_hidden_layers=4), {"model.safetensors": BODY},
           index=None)
# 2.5: safetensors dtypes torch 2.13 writes: uint16 / uint32 / uint64, float8_e8m0fnu (MX scales)
write_ckpt("m_dtypes", dict(L, tie_word_embeddings=True), {"model.safetensors": BODY + [
    ("model.layers.0.mlp.up_proj.weight_packed", "U16", [16, 2]),
    ("model.layers.0.mlp.up_proj.weight_scale", "F8_E8M0", [16, 1]),
    ("model.layers.0.mlp.up_proj.weight_zero", "U32", [16]),
    ("model.layers.0.mlp.up_proj.weight_count", "U64", [2])]}, index=None)
