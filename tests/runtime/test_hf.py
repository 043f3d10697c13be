"""A Hugging Face model sharded by the plan runs its forward (issue 28 item 5; marker
`distributed`): a tiny LlamaForCausalLM (4 query heads, 2 KV heads, GQA) written with
`save_pretrained` (nothing downloaded), planned by `shardc compile CHECKPOINT_DIR`
with FSDP2 4 x TP 2 (cases/hf_llama), run on 8 gloo processes: see hf_forward.py.
"""

from __future__ import annotations

import os
from typing import Any

import harness
import pytest
import torch
from test_distributed import CASES, mismatches, run

pytestmark = pytest.mark.distributed


def test_hf_llama_forward(shardc: str, tmp_path: Any) -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig

    work = str(tmp_path)
    config = LlamaConfig(vocab_size=37, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    ckpt = os.path.join(work, "ckpt")
    AutoModelForCausalLM.from_config(config).save_pretrained(ckpt, safe_serialization=True)
    out = harness.compile_plan(shardc, ckpt, os.path.join(CASES, "hf_llama", "recipe.yaml"),
                               os.path.join(work, "out"))
    ok, text = run([{"kind": "hf", "name": "hf_llama", "outdir": out, "ckpt": ckpt}], work)
    assert ok, mismatches(text) or text
    assert "hf_llama: sharded forward = unsharded" in text, text
