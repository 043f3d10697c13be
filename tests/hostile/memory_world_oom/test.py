"""`memory`, budgets and `inspect` answer every legal world per class of ranks, without a
per-rank table (README.md here: never exit 3 or an out-of-memory): at 2^20 + 1 ranks and on
the folder's 2^31 - 1 rank mesh (bounded address space). Only what writes a row per rank,
compile's plan.json and rank files, is refused above 2^20 ranks with E-MEMORY-WORLD, exit 2,
naming them; nothing is written."""
import json
import resource


def run(h):
    base = (h.folder / "tp_2p31m1.recipe.yaml").read_text()
    at = h.tmp / "tp_2p20.recipe.yaml"
    at.write_text(base.replace("2147483647", str(1 << 20)))
    above = h.tmp / "tp_2p20p1.recipe.yaml"
    above.write_text(base.replace("2147483647", str((1 << 20) + 1)))
    r = h.shardc("memory", "model.yaml", at, "--budget", "80GiB", timeout=60)
    h.expect_exit(r, 0, "peak")
    # Every rank holds the replicated q_proj (64 x 64 bf16) and norm (64 fp32): 33792 bytes with
    # AdamW (state in the param dtype); 50257 embedding rows and 256 w13 rows of 64 bf16
    # elements, one row per rank from rank 0, add 64 x (2 + 2 + 4) = 512 bytes per row.
    base, row = 33792, 512
    for recipe in (at, above):
        r = h.shardc("memory", "model.yaml", recipe, "--format", "json", "--ranks", "0,256,50257",
                     timeout=60)
        h.expect_exit(r, 0)
        doc = json.loads(r.out)
        h.expect(doc["peak"]["bytes"] == base + 2 * row and doc["peak"]["ranks"] == "0-255",
                 f"peak {doc['peak']}")
        totals = [x["bytes"]["total"] for x in doc["ranks"]]
        h.expect(totals == [base + 2 * row, base + row, base], f"totals {totals}")
        h.expect(doc["stages"][0]["num_ranks"] == int(recipe.read_text().split("size: ")[1].split("}")[0]),
                 "stage rank count")
    h.expect_exit(h.shardc("memory", "model.yaml", above, timeout=60), 0, "peak: 0.00 GiB on rank(s) 0-255")
    h.expect_exit(h.shardc("validate", "model.yaml", above, "--budget", "80GiB", timeout=60), 0)
    h.expect_exit(h.shardc("validate", "model.yaml", above, "--budget", f"{base + row}B", timeout=60), 1,
                  "E-BUDGET", "256 of 1048577 ranks are over: 0-255")
    h.expect_exit(h.shardc("inspect", "model.yaml", above, "--rank", "0", timeout=60), 0, "memory")
    r = h.shardc("inspect", "model.yaml", above, "--rank", "1048576", "--format", "json", timeout=60)
    h.expect_exit(r, 0)
    h.expect_exit(h.shardc("inspect", "model.yaml", above, "--rank", "7", "--match", "**", timeout=60), 0)
    # Per-rank files: refused before any table, nothing written.
    r = h.shardc("compile", "model.yaml", above, "-o", h.tmp / "out", "--ranks", "0", timeout=60)
    h.expect_exit(r, 2, "E-MEMORY-WORLD", "1048577", "per-rank memory table of plan.json and the rank files")
    h.expect(not (h.tmp / "out").exists(), "compile left an OUTDIR")
    if not h.sanitizer:  # about 25 s of CPU in Release (the plan itself about 15), 11 MB
        # The folder's own mesh under a 6 GB address-space limit, as repro.sh runs it.
        limit = 6_000_000_000
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
        try:
            r = h.shardc("memory", "model.yaml", "tp_2p31m1.recipe.yaml", "--budget", "80GiB", timeout=600)
            h.expect_exit(r, 0, "2147483647 ranks", "peak: 0.00 GiB on rank(s) 0-255", "fits")
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
