"""Strings from config.json (and paths) written by `shardc import` stay data: the header comments
are one line each whatever they contain, attribute keys are quoted when needed, and the YAML
parses back to exactly the model the checkpoint directory plans (README.md here)."""
import json
import shutil

import yaml


def plan_params(out):
    plan = json.loads((out / "plan.json").read_text())
    return [{k: v for k, v in p.items() if k not in ("rule",)} for p in plan["params"]]


def run(h):
    recipe = h.hostile / "tiny.recipe.yaml"
    for config in ("config.json", "config_arch.json"):
        ck = h.tiny_ckpt(h.tmp / config / "ck", h.folder / config)
        imported = h.tmp / config / "imported.yaml"
        r = h.shardc("import", ck, "-o", imported)
        h.expect_exit(r, 0)
        text = imported.read_text()
        doc = yaml.safe_load(text)
        h.expect(set(doc) <= {"format", "name", "dtype", "attributes", "params", "tied"},
                 f"{config}: top-level keys {sorted(doc)}")
        h.expect("tied" not in doc, f"{config}: an injected `tied:` ({doc.get('tied')})")
        for line in text.splitlines():
            h.expect(not line.startswith(("tied", "error", "#:")), f"{config}: live line {line!r}")
        real = json.loads((h.folder / config).read_text())
        # The model name is the last `/` segment of _name_or_path, whatever it contains.
        want = real["_name_or_path"].rstrip("/").split("/")[-1]
        h.expect(doc["name"] == want, f"{config}: name {doc['name']!r}, want {want!r}")
        from_dir, from_yaml = h.tmp / config / "from_dir", h.tmp / config / "from_yaml"
        h.expect_exit(h.shardc("-q", "compile", ck, recipe, "-o", from_dir), 0)
        h.expect_exit(h.shardc("-q", "compile", imported, recipe, "-o", from_yaml), 0)
        if from_dir.exists() and from_yaml.exists():
            a, b = plan_params(from_dir), plan_params(from_yaml)
            h.expect(a == b, f"{config}: the imported YAML plans differently:\n{a}\n{b}")
            norm = next(p for p in b if p["name"] == "model.norm.weight")
            h.expect(norm["alias_of"] is None, f"{config}: model.norm.weight alias_of {norm['alias_of']}")
        # The verdict line prints the name escaped, on one line.
        r = h.shardc("validate", ck, recipe)
        h.expect_exit(r, 0)
        h.expect(all(not l.startswith(("tied", "error[E-FAKE]")) for l in r.out.splitlines()),
                 f"{config}: verdict {r.out!r}")
    # Attribute keys of a JSON inventory are quoted in the YAML when they are not plain words.
    inv = h.tmp / "inv.json"
    inv.write_text(json.dumps({"name": "inv", "attributes": {"num_attention_heads": 4, "x\ny: [1]": 2,
                                                             "a: b": 3},
                               "params": [{"name": "model.w", "shape": [4, 4], "dtype": "bfloat16"}]}))
    out = h.tmp / "inv.yaml"
    h.expect_exit(h.shardc("import", inv, "-o", out), 0)
    if out.exists():
        doc = yaml.safe_load(out.read_text())
        h.expect(doc.get("attributes") == {"num_attention_heads": 4, "x\ny: [1]": 2, "a: b": 3},
                 f"attributes {doc.get('attributes')}")
        h.expect(set(doc) <= {"format", "name", "dtype", "attributes", "params", "tied"}, f"keys {sorted(doc)}")
