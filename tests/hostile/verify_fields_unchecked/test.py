"""verify checks the fields a runtime acts on that it can re-derive without the inputs
(README.md here): a rank file's alias_of must be plan.json's; plan.json's alias_of must name
a param of the same dtype and shape that is no alias itself; stacked_from's count, sources
and global_shape[0] agree, the sources are distinct, no planned param, and source k is expert
first + k of the stack pattern. Each edit, with the manifest re-signed, is a mismatch (exit 1)
naming the file, the field and both values.

Placements and mesh are re-derived from the shards as far as they tell: one label per axis of
the param's mesh, a Replicate() axis keeps a shard's ranks together, a dim no axis splits is
whole (plain verify refuses the edits below, naming the param and axis). requires_grad
(UNCHECKED) cannot be re-derived from the outputs alone: `verify --against MODEL RECIPE` plans
the inputs again and refuses any plan.json that is not byte for byte their plan (exit 1, the
first differing param or line named), as it does for the placements and mesh edits; plain
verify still passes it (printed, not asserted)."""
import json
import shutil

UNCHECKED = ("requires_grad_false",)
REDERIVED = {"placements_replicate": "placements: axis 'dp_shard' is Replicate(), but shard 0",
             "mesh_expert": "placements: 1 labels but mesh 'expert' has 2 axes"}


def resign_copy(h, src, dst, edit_plan=None, edit_rank0=None):
    shutil.copytree(src, dst)
    if edit_plan:
        plan = json.loads((dst / "plan.json").read_text())
        edit_plan({x["name"]: x for x in plan["params"]})
        (dst / "plan.json").write_text(json.dumps(plan))
    if edit_rank0:
        rank0 = dst / "ranks" / sorted((dst / "ranks").iterdir())[0].name
        doc = json.loads(rank0.read_text())
        edit_rank0({x["name"]: x for x in doc["params"]})
        rank0.write_text(json.dumps(doc, separators=(",", ":")))
    h.resign(dst)
    return dst


def run(h):
    ck = h.tiny_ckpt(h.tmp / "ck")
    out = h.tmp / "out"
    h.expect_exit(h.shardc("-q", "compile", ck, h.hostile / "tiny.recipe.yaml", "-o", out), 0)
    h.expect_exit(h.shardc("verify", out), 0)
    for alias, shown in (("model.layers.0.self_attn.q_proj.weight", "'model.layers.0.self_attn.q_proj.weight'"),
                         ("model.norm.weight", "'model.norm.weight'"), (None, "null")):
        def edit(params, alias=alias):
            params["lm_head.weight"]["alias_of"] = alias

        d = resign_copy(h, out, h.tmp / f"alias-{alias}", edit_rank0=edit)
        h.expect_exit(h.shardc("verify", d), 1, "lm_head.weight", f"alias_of {shown}",
                      "plan.json alias_of 'model.embed_tokens.weight'")
    case = h.repo / "tests/cases/19_ep_efsdp_deepseek16b"
    moe = h.tmp / "moe"
    h.expect_exit(h.shardc("-q", "compile", case / "model.yaml", case / "recipe.yaml", "-o", moe), 0)
    gate = "model.layers.0.mlp.experts.gate_proj"

    def swap(p):
        s = p[gate]["stacked_from"]["sources"]
        s[0], s[1] = s[1], s[0]
        p[gate]["stacked_from"]["first"] = s[0]

    edits = {
        "sources_swapped": (swap, "not expert 2 of the pattern"),
        "sources_swapped_keep_first": (lambda p: p[gate]["stacked_from"]["sources"].__setitem__(
            slice(1, 3), p[gate]["stacked_from"]["sources"][2:0:-1]), "not expert 1 of the pattern"),
        "source_renamed": (lambda p: p[gate]["stacked_from"]["sources"].__setitem__(5, "model.embed_tokens.weight"),
                           "source 'model.embed_tokens.weight' is a planned param"),
        "source_twice": (lambda p: p[gate]["stacked_from"]["sources"].__setitem__(
            7, p[gate]["stacked_from"]["sources"][6]), "twice"),
        "count_65": (lambda p: p[gate]["stacked_from"].__setitem__("count", 65), "count 65, 64 sources"),
        "alias_of_set": (lambda p: p["model.layers.0.mlp.gate.weight"].__setitem__("alias_of", "model.embed_tokens.weight"),
                         "not a param of the same dtype and shape"),
    }
    for name, (edit, message) in edits.items():
        d = resign_copy(h, moe, h.tmp / name, edit_plan=edit)
        h.expect_exit(h.shardc("verify", d), 1, message)
        h.expect_exit(h.shardc("verify", d, "--against", case / "model.yaml", case / "recipe.yaml"), 1,
                      "plan.json is not the plan of")
    for name in UNCHECKED + tuple(REDERIVED):
        def edit(p, name=name):
            e = p["model.embed_tokens.weight"]
            if name == "placements_replicate":
                e["placements"] = ["Replicate()"] * len(e["placements"])
            elif name == "requires_grad_false":
                e["requires_grad"] = False
            else:
                e["mesh"] = "expert"

        d = resign_copy(h, moe, h.tmp / name, edit_plan=edit)
        r = h.shardc("verify", d)
        if name in REDERIVED:
            h.expect_exit(r, 1, "plan.json param model.embed_tokens.weight " + REDERIVED[name])
        else:
            print(f"  (plain verify cannot tell) {name}: verify exit {r.code}")
        r = h.shardc("verify", d, "--against", case / "model.yaml", case / "recipe.yaml")
        # The field and both values are named (it named the param alone).
        field = {"placements_replicate": '`placements`: plan.json has ["Replicate()"], the inputs plan',
                 "requires_grad_false": "`requires_grad`: plan.json has false, the inputs plan true"
                 }.get(name, '`mesh`: plan.json has "expert", the inputs plan "dense"')
        h.expect_exit(r, 1, "plan.json is not the plan of",
                      "first difference at param model.embed_tokens.weight: " + field)
    # The untampered outputs are exactly their inputs' plan; other inputs are not.
    h.expect_exit(h.shardc("verify", moe, "--against", case / "model.yaml", case / "recipe.yaml"), 0)
    h.expect_exit(h.shardc("verify", out, "--against", case / "model.yaml", case / "recipe.yaml"), 1,
                  "plan.json is not the plan of")
    # Inputs that do not plan: their diagnostics, exit 2.
    h.expect_exit(h.shardc("verify", moe, "--against", case / "model.yaml", h.tmp / "missing.yaml"), 2)
