"""Writes the small checkpoints of this folder (tiny shapes) into the current directory:
the four of the upstream report (shared/reports/import_quirks, verbatim below) plus the
variants the checks need (a fixed bnb recipe's model is the same m_bnb8; m_lfs: a Git LFS
pointer in place of the data). Run: python3 make_checkpoints.py (run_report.py runs it in a
temporary folder: `generate` in expect.json)."""
import os, sys
sys.dont_write_bytecode = True  # no __pycache__ in the case folder
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ckptlib import write_ckpt, write_file
L = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8, "num_attention_heads": 2,
     "num_key_value_heads": 2, "vocab_size": 16}
# top-level untied, text_config tied, no lm_head -> shardc keeps tie false, no diagnostic
write_ckpt("m_tie_text_config", {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
           "tie_word_embeddings": False, "text_config": dict(L, tie_word_embeddings=True)},
           {"model.safetensors": [("model.language_model.embed_tokens.weight", "BF16", [16, 8])]}, index=None)
# a rotary buffer -> imported as a trainable param
write_ckpt("m_inv_freq", dict(L, tie_word_embeddings=False), {"model.safetensors": [
    ("model.embed_tokens.weight", "BF16", [16, 8]), ("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", [2])]}, index=None)
# a shard the index does not name -> silently ignored
write_ckpt("m_unindexed", dict(L, tie_word_embeddings=False), {"model-00001-of-00001.safetensors": [
    ("model.embed_tokens.weight", "BF16", [16, 8])]}, index=True)
write_file("m_unindexed/model-mtp-of-00001.safetensors", [("mtp.fc.weight", "BF16", [8, 16])])
# bitsandbytes 8-bit state -> SCB / weight_format imported as params, no diagnostic
write_ckpt("m_bnb8", dict(L, tie_word_embeddings=False, quantization_config={"quant_method": "bitsandbytes", "load_in_8bit": True}),
           {"model.safetensors": [("model.layers.0.self_attn.q_proj.weight", "I8", [8, 8]),
                                  ("model.layers.0.self_attn.q_proj.SCB", "F32", [8]),
                                  ("model.layers.0.self_attn.q_proj.weight_format", "U8", [])]}, index=None)
# --- beyond the upstream report ---
# GPT-2's causal-mask buffers and BERT-style int64 position_ids beside real params
write_ckpt("m_gpt2_buffers", {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 8, "n_head": 2,
                              "n_layer": 1, "vocab_size": 16, "n_positions": 4},
           {"model.safetensors": [("wte.weight", "F32", [16, 8]), ("wpe.weight", "F32", [4, 8]),
                                  ("h.0.attn.bias", "F32", [1, 1, 4, 4]), ("h.0.attn.masked_bias", "F32", []),
                                  ("h.0.attn.c_attn.weight", "F32", [8, 24]), ("h.0.attn.c_attn.bias", "F32", [24]),
                                  ("embeddings.position_ids", "I64", [1, 4])]}, index=None)
# a quantization method shardc does not know (GPTQ: packed int32 qweight, per-group scales)
write_ckpt("m_gptq", dict(L, tie_word_embeddings=False, quantization_config={"quant_method": "gptq", "bits": 4}),
           {"model.safetensors": [("model.layers.0.self_attn.q_proj.qweight", "I32", [1, 8]),
                                  ("model.layers.0.self_attn.q_proj.scales", "F16", [1, 8])]}, index=None)
# a Git LFS pointer checked out in place of the safetensors data (issue 27: "a 2^61-byte header")
os.makedirs("m_lfs", exist_ok=True)
with open("m_lfs/config.json", "w") as fh:
    fh.write('{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}')
with open("m_lfs/model.safetensors", "w") as fh:
    fh.write("version https://git-lfs.github.com/spec/v1\n"
             "oid sha256:4d7a2146fdbd0d0b8a1c7a9b2f3e4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f1e\nsize 16060522496\n")
