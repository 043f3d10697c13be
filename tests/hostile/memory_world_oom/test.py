"""`memory`, budgets, `inspect` and `compile` on a world above 2^20 ranks (up to the legal
2^31 - 1) fail with E-MEMORY-WORLD, exit 2, before any per-rank table; never exit 3 or an
out-of-memory (README.md here). validate without a budget still plans the world. The limit
is checked at 2^20 (a table) and 2^20 + 1 (refused); the folder's 2^31 - 1 mesh is planned
once (about 15 s in Release) outside the sanitizer build."""
import resource


def run(h):
    base = (h.folder / "tp_2p31m1.recipe.yaml").read_text()
    at = h.tmp / "tp_2p20.recipe.yaml"
    at.write_text(base.replace("2147483647", str(1 << 20)))
    above = h.tmp / "tp_2p20p1.recipe.yaml"
    above.write_text(base.replace("2147483647", str((1 << 20) + 1)))
    r = h.shardc("memory", "model.yaml", at, "--budget", "80GiB", timeout=60)
    h.expect_exit(r, 0, "peak")
    commands = [("memory", "model.yaml", above), ("memory", "model.yaml", above, "--format", "json"),
                ("validate", "model.yaml", above, "--budget", "80GiB"),
                ("inspect", "model.yaml", above, "--rank", "0"),
                ("inspect", "model.yaml", above, "--rank", "0", "--format", "json"),
                ("compile", "model.yaml", above, "-o", h.tmp / "out", "--ranks", "0")]
    for args in commands:
        r = h.shardc(*args, timeout=60)
        h.expect_exit(r, 2, "E-MEMORY-WORLD", "1048577")
    h.expect(not (h.tmp / "out").exists(), "compile left an OUTDIR")
    h.expect_exit(h.shardc("validate", "model.yaml", above, timeout=60), 0)
    # inspect --match shows no memory: still answered.
    h.expect_exit(h.shardc("inspect", "model.yaml", above, "--rank", "7", "--match", "**", timeout=60), 0)
    if not h.sanitizer:
        # The folder's own mesh under a 6 GB address-space limit, as repro.sh runs it.
        limit = 6_000_000_000
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
        try:
            r = h.shardc("memory", "model.yaml", "tp_2p31m1.recipe.yaml", timeout=240)
            h.expect_exit(r, 2, "E-MEMORY-WORLD", "2147483647")
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
