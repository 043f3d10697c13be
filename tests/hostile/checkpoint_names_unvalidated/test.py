"""Tensor names from a checkpoint pass the model front end's FQN rule (support/fqn.hpp): a
newline, terminal escape, NUL, empty name or segment, or `{`/`}` is E-CHECKPOINT naming the
file and the escaped name, exit 2, in validate and import (which writes nothing); no output
line carries the raw text (README.md here). A legal non-ASCII name round-trips through
import."""
import json
import struct
import subprocess

NAMES = {"newline": "model.w\nerror[E-FAKE]: injected", "ansi": "model.\u001b[31mred\u001b[0m.w",
         "nul": "model.layers.0.x\u0000evil", "empty": "", "dots": "....", "slash": "../../etc/passwd",
         "brace": "model.**.{E}.w", "close_brace": "model.w}", "space": "model.a b",
         "tab": "model.\tw", "del": "model.w\u007f", "cr": "model.w\rerror[E-FAKE]: x",
         "trailing_dot": "model.w.", "leading_dot": ".model.w"}
WHY = {"newline": "control character", "ansi": "control character", "nul": "control character",
       "empty": "is empty", "dots": "empty segment", "slash": "empty segment",
       "brace": "`{` or `}`", "close_brace": "`{` or `}`", "space": "whitespace",
       "tab": "control character", "del": "control character", "cr": "control character",
       "trailing_dot": "empty segment", "leading_dot": "empty segment"}


def write_ckpt(d, name):
    d.mkdir(parents=True)
    h = json.dumps({name: {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 32]}}).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + bytes(32))


def raw_leak(h, label, r, name):
    """True when some control character of `name` reaches the output unescaped (the character
    with its neighbours in the name, so the output's own newlines do not count)."""
    pieces = [name[max(i - 1, 0):i + 2] for i, c in enumerate(name) if ord(c) < 0x20 or ord(c) == 0x7f]
    return any(p in r.out or p in r.err for p in pieces)


def run(h):
    recipe = h.hostile / "tiny.recipe.yaml"
    for label, name in NAMES.items():
        d = h.tmp / label
        write_ckpt(d, name)
        for fmt in ("text", "json", "github"):
            r = h.shardc("validate", d, recipe, "--format", fmt)
            h.expect_exit(r, 2, "E-CHECKPOINT", "model.safetensors")
            h.expect(WHY[label] in r.text, f"{label} {fmt}: does not say why: {r.text[-600:]}")
            h.expect(not raw_leak(h, label, r, name), f"{label} {fmt}: raw control text in the output")
        out = h.tmp / f"{label}.yaml"
        r = h.shardc("import", d, "-o", out)
        h.expect_exit(r, 2, "E-CHECKPOINT")
        h.expect(not out.exists(), f"{label}: import wrote {out}")
        h.expect(not raw_leak(h, label, r, name), f"{label} import: raw control text in the output")
    # The same text in a model YAML is refused by the front end with the same words.
    y = h.tmp / "model.yaml"
    y.write_text('format: shardc.model/v1\nname: m\ndtype: bfloat16\nparams:\n'
                 '  - {name: "model.w\\nerror", shape: [4, 4]}\n')
    h.expect_exit(h.shardc("validate", y, recipe), 2, "E-MODEL", "contains whitespace or a control character")
    # Legal names outside ASCII plan from the checkpoint and from its import alike.
    d = h.tmp / "utf8"
    write_ckpt(d, "model.caf\u00e9.w\u2028x")
    h.expect_exit(h.shardc("validate", d, recipe), 0)
    out = h.tmp / "utf8.yaml"
    h.expect_exit(h.shardc("import", d, "-o", out), 0)
    from_dir, from_yaml = h.tmp / "from_dir", h.tmp / "from_yaml"
    h.expect_exit(h.shardc("-q", "compile", d, recipe, "-o", from_dir), 0)
    h.expect_exit(h.shardc("-q", "compile", out, recipe, "-o", from_yaml), 0)
    if from_dir.exists() and from_yaml.exists():
        names = [[p["name"] for p in json.loads((x / "plan.json").read_text())["params"]]
                 for x in (from_dir, from_yaml)]
        h.expect(names[0] == names[1] == ["model.caf\u00e9.w\u2028x"], f"names differ: {names}")
