"""Two compiles into one OUTDIR at the same time: the second is refused (exit 2, "being
written by another shardc compile", naming the holder's pid) while the first holds the lock,
so the directory is always one complete compile that verifies (README.md here)."""
import fcntl
import os
import subprocess


def run(h):
    model = h.repo / "plans/deepseek-v3.model.yaml"
    recipe_a = h.repo / "plans/deepseek-v3-pp16-ep64.recipe.yaml"
    text = recipe_a.read_text()
    recipe_b = h.tmp / "variant.recipe.yaml"
    recipe_b.write_text(text.split("\ntraining:")[0] + "\ntraining: {optimizer: sgd}\n")
    # Deterministic: a lock held by this process makes compile refuse at once.
    out = h.tmp / "held"
    lock_path = h.tmp / ".held.shardc-lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        r = h.shardc("compile", model, recipe_a, "-o", out, "--ranks", "0", "-q")
        h.expect_exit(r, 2, "being written by another shardc compile", f"pid {os.getpid()}")
        h.expect(not out.exists(), "the refused compile created OUTDIR")
    os.remove(lock_path)
    # Racing compiles, in place (a foreign file, --force) and swap (absent OUTDIR).
    for mode in ("inplace", "swap", "inplace", "swap"):
        out = h.tmp / f"out-{mode}"
        if out.exists():
            subprocess.run(["rm", "-rf", str(out)], check=True)
        if mode == "inplace":
            out.mkdir()
            (out / "NOTES.txt").write_text("foreign\n")
        cmds = [[h.bin, "compile", str(model), str(r), "-o", str(out), "-q", "--force",
                 "--ranks", "0-511"] for r in (recipe_a, recipe_b)]
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in cmds]
        results = [(p.wait(timeout=300), p.stdout.read() + p.stderr.read()) for p in procs]
        codes = [c for c, _ in results]
        print(f"  {mode}: exits {codes}")
        h.expect(0 in codes, f"{mode}: neither compile succeeded: {results}")
        for code, text in results:
            h.expect(code == 0 or (code == 2 and "being written by another shardc compile" in text),
                     f"{mode}: exit {code}: {text[-800:]}")
        r = h.shardc("verify", out, "--ranks", "0", timeout=120)
        h.expect_exit(r, 0)
        if mode == "inplace":
            h.expect((out / "NOTES.txt").exists(), "the foreign file went")
        h.expect(not (h.tmp / f".out-{mode}.shardc-lock").exists(), f"{mode}: lock file left")
