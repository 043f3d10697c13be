"""Rank sets and plan shapes from untrusted text never overflow int64 (README.md here): ranks at
or above 2^31 - 1 are refused by the rank-set parser before any count; reshard refuses a
global_shape of 2^62 or more elements (E-RESHARD-INPUT) instead of multiplying it. The
sanitizer build of this test fails on any UBSan report."""
import json


def tamper(h, src, dst, edit):
    import shutil
    shutil.copytree(src, dst)
    plan = json.loads((dst / "plan.json").read_text())
    q = next(x for x in plan["params"] if x["name"] == "model.layers.0.self_attn.q_proj.weight")
    edit(q)
    (dst / "plan.json").write_text(json.dumps(plan, separators=(",", ":")))
    h.resign(dst)
    return dst


def run(h):
    model, recipe = h.repo / "plans/llama-3.1-8b.model.yaml", h.repo / "plans/llama-3.1-8b-dp8-tp8.recipe.yaml"
    x = h.tmp / "x"
    h.expect_exit(h.shardc("compile", model, recipe, "-o", x, "-q", "--ranks", "0"), 0)
    for ranks in ("0-9223372036854775807", "0-9223372036854775807:2", "9223372036854775806-9223372036854775807",
                  "2147483647", "0,2147483647-2147483648"):
        r = h.shardc("compile", model, recipe, "-o", h.tmp / "y", "-q", "--ranks", ranks)
        h.expect_exit(r, 2, "out of range")
        h.expect_exit(h.shardc("memory", model, recipe, "--ranks", ranks), 2, "out of range")
        h.expect_exit(h.shardc("verify", x, "--ranks", ranks), 2, "out of range")
    ck = h.tiny_ckpt(h.tmp / "ck")
    out = h.tmp / "out"
    h.expect_exit(h.shardc("-q", "compile", ck, h.hostile / "tiny.recipe.yaml", "-o", out), 0)

    def ranks63(q):
        q["shards"][0]["ranks"] = "0-9223372036854775807"

    r63 = tamper(h, out, h.tmp / "r63", ranks63)
    h.expect_exit(h.shardc("verify", r63), 1, "0-9223372036854775807")
    h.expect_exit(h.shardc("reshard", r63, out), 2, "E-RESHARD-INPUT", "out of range")
    h.expect_exit(h.shardc("reshard", out, r63), 2, "E-RESHARD-INPUT", "out of range")

    # numel at the limit (2^62 elements: refused) and past int64 when multiplied.
    for shape in ([4611686018427387903, 64], [2305843009213693952, 2], [-1, 64]):
        def big(q, shape=shape):
            q["global_shape"] = shape
            q["shards"][0]["local_shape"] = shape

        d = tamper(h, out, h.tmp / f"big{shape[0]}", big)
        r = h.shardc("reshard", d / "plan.json", d / "plan.json")
        h.expect_exit(r, 2, "E-RESHARD-INPUT", "2^62 or more elements")
        r = h.shardc("verify", d)
        h.expect_exit(r, 1, "negative extent or 2^62+ elements")
    # One element below the limit (2^62 - 1) is a representable numel: refused for another reason.
    def below(q):
        q["global_shape"] = [4611686018427387903]
        q["shards"][0]["local_shape"] = [4611686018427387903]
        q["shards"][0]["global_offset"] = [0]

    d = tamper(h, out, h.tmp / "below", below)
    r = h.shardc("reshard", d / "plan.json", d / "plan.json")
    h.expect(r.code in (1, 2) and "2^62 or more" not in r.text, f"2^62 - 1 elements: {r.text[-800:]}")
    # A shard box outside its param (local [65, 64] in [64, 64]) is malformed input for reshard.
    def outside(q):
        q["shards"][0]["local_shape"] = [65, 64]

    d = tamper(h, out, h.tmp / "outside", outside)
    h.expect_exit(h.shardc("reshard", d / "plan.json", out / "plan.json"), 2, "E-RESHARD-INPUT",
                  "is not inside global_shape")
