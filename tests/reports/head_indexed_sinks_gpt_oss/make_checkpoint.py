"""A sparse gpt-oss checkpoint of one attention block (config as gpt-oss-120b's): `shardc
import` must mark the sinks head-indexed. Run in a temporary folder by run_report.py."""
import os, sys
sys.dont_write_bytecode = True  # no __pycache__ in the case folder
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import_quirks"))
from ckptlib import write_ckpt
a = "model.layers.0.self_attn."
write_ckpt("gpt_oss", {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
                       "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088,
                       "num_local_experts": 128, "tie_word_embeddings": False},
           {"model.safetensors": [(a + "q_proj.weight", "BF16", [4096, 2880]), (a + "q_proj.bias", "BF16", [4096]),
                                  (a + "k_proj.weight", "BF16", [512, 2880]), (a + "k_proj.bias", "BF16", [512]),
                                  (a + "v_proj.weight", "BF16", [512, 2880]), (a + "v_proj.bias", "BF16", [512]),
                                  (a + "o_proj.weight", "BF16", [2880, 4096]), (a + "o_proj.bias", "BF16", [2880]),
                                  (a + "sinks", "F32", [64])]}, index=None)
