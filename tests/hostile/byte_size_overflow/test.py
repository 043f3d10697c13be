"""Byte sizes above 2^62 are refused (exit 2), never wrapped modulo 2^64 (README.md here)."""


def run(h):
    model, recipe = h.repo / "plans/llama-3.1-8b.model.yaml", h.repo / "plans/llama-3.1-8b-dp8-tp8.recipe.yaml"
    for budget in ("18446744073709551620", "18446744073709551716GiB", "99999999999999999999GiB",
                   "4611686018427387905", "4097PiB", "9223372036854775808"):
        for command in ("validate", "memory"):
            r = h.shardc(command, model, recipe, "--budget", budget)
            h.expect_exit(r, 2, "positive byte size", budget)
    # 2^62 itself is the largest budget: accepted (and far above any rank's total).
    h.expect_exit(h.shardc("validate", model, recipe, "--budget", "4096PiB"), 0)
    h.expect_exit(h.shardc("validate", model, recipe, "--budget", "80GiB"), 0)
    for name, text in (("budget_wrap.recipe.yaml", "18446744073709551620"),
                       ("budget_20digits.recipe.yaml", "99999999999999999999GiB")):
        r = h.shardc("validate", "model.yaml", name)
        h.expect_exit(r, 2, "E-RECIPE", "`budget` must be a positive byte size", text)
