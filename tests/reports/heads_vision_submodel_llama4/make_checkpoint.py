"""A sparse Llama-4-Scout-like checkpoint of one text and one vision attention block, with the
published config's head counts (text_config: 40 heads, 8 KV heads, head_dim 128, hidden 5120;
vision_config: 16 heads, hidden 1408). Names as the hub stores them: language_model.model.*,
vision_model.model.* (Llama4ForConditionalGeneration builds vision_model from vision_config,
language_model from text_config: transformers models/llama4/modeling_llama4.py)."""
import os, sys
sys.dont_write_bytecode = True  # no __pycache__ in the case folder
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import_quirks"))
from ckptlib import write_ckpt
t = "language_model.model.layers.0.self_attn."
v = "vision_model.model.layers.0.self_attn."
write_ckpt("llama4", {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
                      "text_config": {"model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40,
                                      "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048,
                                      "num_local_experts": 16},
                      "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408,
                                        "num_attention_heads": 16, "intermediate_size": 5632},
                      "tie_word_embeddings": False},
           {"model.safetensors": [(t + "q_proj.weight", "BF16", [5120, 5120]), (t + "k_proj.weight", "BF16", [1024, 5120]),
                                  (t + "v_proj.weight", "BF16", [1024, 5120]), (t + "o_proj.weight", "BF16", [5120, 5120]),
                                  (v + "q_proj.weight", "BF16", [1408, 1408]), (v + "q_proj.bias", "BF16", [1408]),
                                  (v + "k_proj.weight", "BF16", [1408, 1408]), (v + "k_proj.bias", "BF16", [1408]),
                                  (v + "v_proj.weight", "BF16", [1408, 1408]), (v + "v_proj.bias", "BF16", [1408]),
                                  (v + "o_proj.weight", "BF16", [1408, 1408]), (v + "o_proj.bias", "BF16", [1408])]},
           index=None)
