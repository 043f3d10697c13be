"""The smaller findings of issue 24 item 9 (README.md here): an index listing a tensor twice, FP8
weights without scales under `fp8_scales: follow`, more KV heads than heads in config.json, a
Git LFS pointer as a safetensors file."""
import json
import struct


def st_file(path, tensors):
    header, off = {}, 0
    for name, shape in tensors:
        n = 2
        for e in shape:
            n *= e
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + bytes(off))


def run(h):
    recipe = h.hostile / "tiny.recipe.yaml"
    # 1. An index with a duplicate key (raw JSON text: json.dumps cannot write one).
    d = h.tmp / "dup_index"
    d.mkdir()
    st_file(d / "a.safetensors", [("model.w", [4, 4])])
    st_file(d / "b.safetensors", [("model.w", [4, 4])])
    (d / "model.safetensors.index.json").write_text(
        '{"metadata": {}, "weight_map": {"model.w": "a.safetensors", "model.w": "b.safetensors"}}')
    h.expect_exit(h.shardc("validate", d, recipe), 2, "E-CHECKPOINT", "lists tensor 'model.w' twice")
    # 2. FP8 weights with no scales at all.
    m = h.tmp / "fp8.model.yaml"
    m.write_text("format: shardc.model/v1\nname: fp8\ndtype: float8_e4m3fn\n"
                 "attributes: {weight_block_size: [128, 128]}\nparams:\n"
                 "  - {name: model.layers.0.mlp.up_proj.weight, shape: [256, 256]}\n"
                 "  - {name: model.layers.0.mlp.down_proj.weight, shape: [256, 256]}\n"
                 "  - {name: model.norm.weight, shape: [256], dtype: bfloat16}\n")
    for policy in ("follow", "auto"):
        r_ = h.tmp / f"fp8-{policy}.recipe.yaml"
        r_.write_text(f"format: shardc.recipe/v1\nmesh: [{{name: tp, size: 2}}]\nfp8_scales: {policy}\n"
                      "rules:\n  - {match: \"**.up_proj.weight\", placements: {tp: Shard(0)}}\n"
                      "  - {match: \"**\", placements: {}}\n")
        r = h.shardc("validate", m, r_, "--format", "json")
        h.expect_exit(r, 1, "E-FP8-SCALE", "model.layers.0.mlp.up_proj.weight_scale_inv")
    # With the scales present the same model plans.
    m2 = h.tmp / "fp8-scaled.model.yaml"
    m2.write_text(m.read_text() +
                  "  - {name: model.layers.0.mlp.up_proj.weight_scale_inv, shape: [2, 2], dtype: float32}\n"
                  "  - {name: model.layers.0.mlp.down_proj.weight_scale_inv, shape: [2, 2], dtype: float32}\n")
    h.expect_exit(h.shardc("validate", m2, h.tmp / "fp8-follow.recipe.yaml"), 0)
    # `fp8_scales: rules` places FP8 params without scales as any param.
    r_ = h.tmp / "fp8-rules.recipe.yaml"
    r_.write_text((h.tmp / "fp8-follow.recipe.yaml").read_text().replace("follow", "rules"))
    h.expect_exit(h.shardc("validate", m, r_), 0)
    # 3. config.json with more KV heads than heads, or a count that does not divide.
    for kv, heads, word in ((8, 4, "is more than"), (3, 4, "does not divide")):
        cfg = h.tmp / f"kv{kv}.json"
        cfg.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                   "num_attention_heads": heads, "num_key_value_heads": kv,
                                   "hidden_size": 64, "vocab_size": 1000,
                                   "tie_word_embeddings": True}))
        ck = h.tiny_ckpt(h.tmp / f"ck-kv{kv}", cfg)
        h.expect_exit(h.shardc("validate", ck, recipe), 2, "E-CHECKPOINT",
                      f"num_key_value_heads {kv} {word} num_attention_heads {heads}")
    # 4. A Git LFS pointer in place of the data.
    d = h.tmp / "lfs"
    d.mkdir()
    (d / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
        "size 16060522496\n")
    h.expect_exit(h.shardc("validate", d, recipe), 2, "E-CHECKPOINT", "Git LFS pointer", "git lfs pull")
