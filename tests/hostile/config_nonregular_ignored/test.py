"""A config.json that is there but is not a readable regular file (a directory, a device, a
dangling link) is E-CHECKPOINT, exit 2; only a missing name means "no config.json"
(README.md here)."""
import os
import shutil


def run(h):
    ck = h.tiny_ckpt(h.tmp / "ck")
    recipe = h.hostile / "tiny.recipe.yaml"
    h.expect_exit(h.shardc("validate", ck, recipe), 0)
    cases = {"dir": (lambda p: os.mkdir(p), "is a directory"),
             "dev": (lambda p: os.symlink("/dev/zero", p), "is a device"),
             "dangling": (lambda p: os.symlink(h.tmp / "nowhere.json", p), "No such file")}
    for label, (make, what) in cases.items():
        d = h.tmp / label
        shutil.copytree(ck, d)
        os.remove(d / "config.json")
        make(d / "config.json")
        r = h.shardc("validate", d, recipe)
        h.expect_exit(r, 2, "E-CHECKPOINT", "cannot read config.json", what)
        h.expect("W-HEADS-UNKNOWN" not in r.text, f"{label}: planned without the config: {r.text}")
        r = h.shardc("import", d, "-o", h.tmp / f"{label}.yaml")
        h.expect_exit(r, 2, "cannot read config.json", what)
        h.expect(not (h.tmp / f"{label}.yaml").exists(), f"{label}: import wrote a model")
    # No config.json at all is still fine (warnings only): the tie and head counts are unknown.
    d = h.tmp / "absent"
    shutil.copytree(ck, d)
    os.remove(d / "config.json")
    r = h.shardc("validate", d, recipe)
    h.expect_exit(r, 0, "W-HEADS-UNKNOWN")
