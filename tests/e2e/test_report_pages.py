#!/usr/bin/env python3
"""`shardc report OUTDIR` and `shardc search ... --report` end to end (issue 25, docs/report.md).

* Every shipped plan (plans/*.recipe.yaml with its model): `report MODEL RECIPE` exits 0,
  the page is under 4 MB, and its memory table (every stage x kind x min / median / max) and
  peak equal `memory --format json`.
* OUTDIR pages: for shipped plans (pp 8; an expert mesh; a tie warning) and a recipe with a
  training shape (activations counted),
  `compile` then `report OUTDIR`: the memory table (every stage x kind x min / median / max),
  the peak, the largest-params table and the embedded ranks' params tables are byte-equal to
  the MODEL RECIPE page's, and equal `memory --format json`; plan.json's world summary table
  equals the JSON's per-stage figures folded over the stages; the page says what the OUTDIR
  does not hold (source lines, budget) and shows plan.json's warnings with file:line:col.
* An OUTDIR with some rank files (`compile --ranks`): the page says how many, has no chart.
* Escaping: a model whose names hold HTML, compiled and reported from its OUTDIR.
* Bad OUTDIRs (E-REPORT-INPUT, exit 2, code + file + hint, never a crash): no manifest,
  a truncated plan.json, a malformed plan.json whose digest the manifest was edited to match,
  an inconsistent plan.json, a rank file of another rank.
* Search pages: the ranked rows' peak, headroom, step, the step bars' terms and the pruned
  counts equal `search --format json`; a rule-set path with HTML is text; with a budget
  nothing fits the page is still written (exit 1, E-SEARCH) and says so.
Usage: test_report_pages.py --shardc BIN
"""
import argparse
import hashlib
import html as html_text
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLANS = ROOT / "plans"
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILED.append(what)


def run(cmd, timeout=300):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def must(cmd):
    r = run(cmd)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stderr[-3000:]}")
    return r


def element(page, tag, attr_id):
    """The text of `<tag id="attr_id" ...>...</tag>` (no nesting of the same tag)."""
    m = re.search(r'<%s id="%s".*?</%s>' % (tag, attr_id, tag), page, re.S)
    return m.group(0) if m else None


def stage_cells(page):
    table = element(page, "table", "memory-table") or ""
    return {(m[0], m[1], m[2]): int(m[3]) for m in re.findall(
        r'data-stage="(\d+)" data-kind="(\w+)" data-stat="(\w+)" data-bytes="(\d+)"', table)}


def rank_tables(page):
    return {m.group(1): m.group(0) for m in re.finditer(
        r'<table class="rank-params" data-rank="(\d+)".*?</table>', page, re.S)}


def memory_json(shardc, model, recipe):
    return json.loads(must([shardc, "memory", model, recipe, "--format", "json"]).stdout)


def model_for_recipe(recipe):
    """The longest plans/*.model.yaml whose stem starts the recipe's (test_schemas' rule)."""
    stem = recipe.name[: -len(".recipe.yaml")]
    for m in sorted(recipe.parent.glob("*.model.yaml"), key=lambda p: -len(p.name)):
        base = m.name[: -len(".model.yaml")]
        if stem == base or stem.startswith(base + "-"):
            return m
    return None


def every_shipped_plan_checks(shardc, tmp):
    recipes = sorted(PLANS.glob("*.recipe.yaml"))
    check(len(recipes) >= 20, f"plans/ holds the shipped plans ({len(recipes)})")
    for recipe in recipes:
        label = recipe.name[: -len(".recipe.yaml")]
        model = model_for_recipe(recipe)
        check(model is not None, f"{label}: its model is in plans/")
        if model is None:
            continue
        page = tmp / f"every-{label}.html"
        r = run([shardc, "report", model, recipe, "-o", page])
        ok = r.returncode == 0 and page.exists()
        check(ok, f"{label}: report exits 0 and writes the page (exit {r.returncode}: {r.stderr[-300:]})")
        if not ok:
            continue
        size = page.stat().st_size
        check(size < 4 * 1024 * 1024, f"{label}: the page is {size / 1024:.0f} KiB (< 4 MB)")
        html = page.read_text(encoding="utf-8")
        mem = memory_json(shardc, model, recipe)
        cells = stage_cells(html)
        want = {(str(st["stage"]), kind, stat): v[stat] for st in mem["stages"]
                for kind, v in st.items() if isinstance(v, dict) for stat in ("min", "median", "max")}
        check(cells and cells == want,
              f"{label}: the page's {len(cells)} memory figures = memory --format json's {len(want)}")
        peak = re.search(r'<p id="peak" data-bytes="(\d+)"', html)
        check(peak is not None and int(peak.group(1)) == mem["peak"]["bytes"],
              f"{label}: peak {peak.group(1) if peak else None} = {mem['peak']['bytes']}")


def outdir_page_checks(shardc, tmp, model, recipe, label):
    out = tmp / f"{label}-out"
    must([shardc, "compile", model, recipe, "-o", out])
    page_plan = tmp / f"{label}-plan.html"
    page_out = tmp / f"{label}-outdir.html"
    must([shardc, "report", model, recipe, "-o", page_plan])
    r = run([shardc, "report", out, "-o", page_out])
    check(r.returncode == 0 and page_out.exists(), f"{label}: report OUTDIR exits 0 ({r.stderr[-300:]})")
    if r.returncode != 0:
        return
    a = page_plan.read_text(encoding="utf-8")
    b = page_out.read_text(encoding="utf-8")
    mem = memory_json(shardc, model, recipe)
    cells = stage_cells(b)
    check(cells and cells == stage_cells(a), f"{label}: memory table of the OUTDIR page = the MODEL RECIPE page's ({len(cells)} cells)")
    compared = 0
    for s in mem["stages"]:
        for kind, st in s.items():
            if not isinstance(st, dict):
                continue
            for stat in ("min", "median", "max"):
                compared += 1
                if cells.get((str(s["stage"]), kind, stat)) != st[stat]:
                    check(False, f"{label}: stage {s['stage']} {kind} {stat}: page {cells.get((str(s['stage']), kind, stat))}, memory json {st[stat]}")
    check(compared == len(cells), f"{label}: {compared} figures of memory --format json, the page has {len(cells)}")
    peak = re.search(r'<p id="peak" data-bytes="(\d+)" data-ranks="([^"]*)"', b)
    check(peak and int(peak.group(1)) == mem["peak"]["bytes"] and peak.group(2) == mem["peak"]["ranks"],
          f"{label}: peak {peak.groups() if peak else None} vs {mem['peak']['bytes']} on {mem['peak']['ranks']}")
    check(element(a, "table", "largest-params") == element(b, "table", "largest-params"),
          f"{label}: the largest-params table is the MODEL RECIPE page's")
    check(element(a, "table", "activations") == element(b, "table", "activations"),
          f"{label}: the activations table (plan.json's, when counted) is the MODEL RECIPE page's")
    ta, tb = rank_tables(a), rank_tables(b)
    check(ta and ta == tb, f"{label}: embedded ranks {sorted(tb)} and their params tables are the MODEL RECIPE page's {sorted(ta)}")
    # plan.json's world summary: each kind's min / max over all ranks.
    world = {(m[0], m[1]): int(m[2]) for m in re.findall(
        r'data-kind="(\w+)" data-stat="(min|max)" data-bytes="(\d+)"', element(b, "table", "plan-memory") or "")}
    folded = 0
    for kind in ("params", "grads", "master_weights", "optimizer_state", "total"):
        lo = min(s[kind]["min"] for s in mem["stages"])
        hi = max(s[kind]["max"] for s in mem["stages"])
        folded += world.get((kind, "min")) == lo and world.get((kind, "max")) == hi
    check(folded == 5, f"{label}: plan.json's world summary = memory json folded over stages")
    check("no source lines" in b and "no memory budget" in b, f"{label}: the page says what the OUTDIR does not hold")
    plan_json = json.loads((out / "plan.json").read_text())
    diags = re.findall(r'<div class="diag (\w+)" data-code="([\w-]+)"><div><span class="mono loc">([^<]*)</span>', b)
    want = [(d["severity"], d["code"], f"{d['file']}:{d['line']}:{d['column']}") for d in plan_json["diagnostics"]]
    check(diags == want, f"{label}: the page's diagnostics are plan.json's ({len(want)})")
    return out


def bad_outdir_checks(shardc, tmp, good):
    def expect_bad(out, label, file_part):
        r = run([shardc, "report", out, "-o", tmp / "bad.html", "--diag-format", "json"])
        try:
            diags = json.loads(r.stdout)
        except json.JSONDecodeError:
            diags = []
        ok = (r.returncode == 2 and len(diags) == 1 and diags[0]["code"] == "E-REPORT-INPUT"
              and diags[0]["file"].endswith(file_part) and diags[0]["hint"].strip()
              and not (tmp / "bad.html").exists())
        check(ok, f"bad OUTDIR ({label}): E-REPORT-INPUT naming {file_part}, exit 2, no page "
                  f"(exit {r.returncode}: {r.stdout[:300]!r} {r.stderr[-300:]!r})")

    def copy(label):
        out = tmp / f"bad-{label}"
        shutil.copytree(good, out)
        return out

    def rewrite_manifest(out, rel):
        manifest = json.loads((out / "manifest.json").read_text())
        data = (out / rel).read_bytes()
        entries = [manifest["plan"]] + manifest["rank_files"]["files"]
        for e in entries:
            if e["path"] == rel:
                e["bytes"] = len(data)
                e["sha256"] = hashlib.sha256(data).hexdigest()
        (out / "manifest.json").write_text(json.dumps(manifest))

    out = copy("no-manifest")
    (out / "manifest.json").unlink()
    expect_bad(out, "no manifest.json", "manifest.json")
    out = copy("truncated")
    text = (out / "plan.json").read_bytes()
    (out / "plan.json").write_bytes(text[: len(text) // 2])
    expect_bad(out, "plan.json truncated", "plan.json")
    out = copy("malformed")
    (out / "plan.json").write_bytes(text[: len(text) // 2])
    rewrite_manifest(out, "plan.json")
    expect_bad(out, "plan.json truncated, the manifest edited to match", "plan.json")
    out = copy("inconsistent")
    doc = json.loads(text)
    doc["meshes"]["dense"][0]["size"] *= 2
    (out / "plan.json").write_text(json.dumps(doc))
    rewrite_manifest(out, "plan.json")
    expect_bad(out, "meshes not of world_size ranks", "plan.json")
    out = copy("swapped")
    files = sorted((out / "ranks").iterdir())
    a, b = files[0], files[-1]
    ta, tb = a.read_bytes(), b.read_bytes()
    a.write_bytes(tb)
    b.write_bytes(ta)
    rewrite_manifest(out, f"ranks/{a.name}")
    rewrite_manifest(out, f"ranks/{b.name}")
    expect_bad(out, "rank files swapped, the manifest edited to match", a.name)


def search_page_checks(shardc, tmp):
    model = PLANS / "llama-3.1-8b.model.yaml"
    hostile_dir = tmp / "rules<b>dir"
    hostile_dir.mkdir()
    rules = hostile_dir / "a<i>x&.recipe.yaml"
    shutil.copy(PLANS / "llama-3.1-8b-dp8-tp8.recipe.yaml", rules)
    args = ["--world", "64", "--hardware", "h100", "--seq-len", "8192",
            "--global-batch-tokens", str(8192 * 256), "--budget", "80GB", "--rules", rules]
    page = tmp / "search.html"
    r = run([shardc, "search", model, *args, "--format", "json", "--report", page])
    check(r.returncode == 0 and page.exists(), f"search --report: exit 0 and the page written ({r.stderr[-300:]})")
    if r.returncode != 0:
        return
    doc = json.loads(r.stdout)  # stdout stays the JSON document
    html = page.read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="layout" data-rank="(\d+)" data-layout="([^"]*)" data-peak="(\d+)" '
                      r'data-headroom="(-?\d+)" data-step="([^"]+)"', html)
    check(len(rows) == len(doc["ranked"]) > 0, f"search page: {len(rows)} ranked rows, JSON {len(doc['ranked'])}")
    for row, want in zip(rows, doc["ranked"]):
        check(html_text.unescape(row[1]) == want["layout"] and int(row[2]) == want["peak_bytes"] and int(row[3]) == want["headroom_bytes"]
              and abs(float(row[4]) - want["step_seconds"]) <= 1e-5 * want["step_seconds"],
              f"search page #{row[0]}: {row[1:]} vs {want['layout']} {want['peak_bytes']} {want['headroom_bytes']} {want['step_seconds']}")
    for i, want in enumerate(doc["ranked"], 1):
        bar = re.search(r'<g class="step-bar" data-rank="%d".*?</g>' % i, html, re.S)
        terms = dict(re.findall(r'data-term="([^"]+)" data-seconds="([^"]+)"', bar.group(0) if bar else ""))
        expect = {"compute": want["compute_seconds"], "recompute": want["recompute_seconds"],
                  "imbalance": want["imbalance_seconds"], "bubble": want["bubble_seconds"],
                  "optimizer": want["optimizer_seconds"]}
        for c in want["comm"]:
            expect["comm " + c["axis"]] = c["exposed_seconds"]
        same = set(terms) == set(expect) and all(
            abs(float(terms[k]) - v) <= 1e-5 * max(abs(v), 1e-9) for k, v in expect.items())
        total = sum(float(v) for v in terms.values())
        check(same and abs(total - want["step_seconds"]) <= 1e-4 * want["step_seconds"],
              f"search page #{i}: step bar terms {terms} = JSON {expect}, summing to the step {want['step_seconds']}")
    pruned = {html_text.unescape(m[0]): int(m[1]) for m in re.findall(r'data-reason="([^"]+)" data-count="(\d+)"', html)}
    check(pruned == doc["pruned"], f"search page: pruned counts {pruned} vs JSON {doc['pruned']}")
    counts = re.search(r'id="counts" data-enumerated="(\d+)" data-screened="(\d+)" data-checked="(\d+)"', html)
    check(counts and [int(x) for x in counts.groups()] == [doc["enumerated"], doc["screened"], doc["checked"]],
          "search page: enumerated / screened / checked as the JSON's")
    check("<b>" not in html and html.count("<script") == 2 and "rules&lt;b&gt;dir" in html
          and "a&lt;i&gt;x&amp;.recipe.yaml" in html and "<i>" not in html,
          "search page: the rule-set path with HTML is text")
    # Nothing fits: E-SEARCH, exit 1, and the page says so.
    page = tmp / "search-none.html"
    r = run([shardc, "search", model, *args[:-3], "1GB", "--rules", rules, "--report", page])
    html = page.read_text(encoding="utf-8") if page.exists() else ""
    check(r.returncode == 1 and "E-SEARCH" in r.stderr and 'id="none-ranked"' in html
          and "smallest memory found" in html, f"search page, budget nothing fits: exit {r.returncode}, the page says so")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardc", required=True)
    shardc = ap.parse_args().shardc
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        every_shipped_plan_checks(shardc, tmp)
        outdir_page_checks(shardc, tmp, PLANS / "megatron-llama-3-70b.model.yaml",
                                      PLANS / "megatron-llama-3-70b-tp8-pp8-dp8.recipe.yaml", "megatron-70b")
        outdir_page_checks(shardc, tmp, PLANS / "qwen3-30b-a3b.model.yaml",
                           PLANS / "qwen3-30b-a3b-ep8-fsdp.recipe.yaml", "qwen3-30b")
        outdir_page_checks(shardc, tmp, PLANS / "gpt2.model.yaml", PLANS / "gpt2-tp4-tied.recipe.yaml", "gpt2")
        # A training shape (activations counted: plan.json's per_rank_memory holds the
        # activations' statistics and the per-stage `stage_activations`): the layout
        # search's best recipe for Llama-3.1-8B on 64 GPUs (pp 2, zero bubble).
        llama8b = PLANS / "llama-3.1-8b.model.yaml"
        act = tmp / "act.recipe.yaml"
        must([shardc, "search", llama8b, "--world", "64", "--hardware", "h100", "--seq-len", "8192",
              "--global-batch-tokens", str(8192 * 256), "--budget", "80GB", "--emit-recipe", act])
        outdir_page_checks(shardc, tmp, llama8b, act, "llama8b-activations")
        # Some rank files only.
        some = tmp / "some-out"
        must([shardc, "compile", PLANS / "gpt2.model.yaml", PLANS / "gpt2-tp4-tied.recipe.yaml", "-o", some, "--ranks", "1,3"])
        page = tmp / "some.html"
        r = run([shardc, "report", some, "-o", page])
        html = page.read_text(encoding="utf-8") if page.exists() else ""
        world = json.loads((some / "plan.json").read_text())["world_size"]
        check(r.returncode == 0 and f"holds 2 of {world} rank files" in html and 'id="memory-chart"' not in html
              and 'id="plan-memory"' in html and sorted(rank_tables(html)) == ["1"],
              f"OUTDIR with rank files 1 and 3: the page says 2 of {world}, world summary only, rank 1 embedded (exit {r.returncode})")
        r = run([shardc, "report", some, "-o", page, "--ranks", "0"])
        check(r.returncode == 2 and "no rank file of rank 0" in r.stderr, "OUTDIR --ranks without its file: exit 2")
        # Escaping, through the OUTDIR.
        model = tmp / "hostile.model.yaml"
        model.write_text('format: shardc.model/v1\nname: "<img src=x onerror=alert(1)>"\ndtype: float32\n'
                         'params:\n  - {name: "a.<script>x</script>.w", shape: [64, 6]}\n')
        recipe = tmp / "hostile.recipe.yaml"
        recipe.write_text('format: shardc.recipe/v1\nmesh:\n  - {name: tp, size: 4}\nrules:\n'
                          '  - match: "**"\n    placements: {tp: Shard(0)}\n')
        must([shardc, "compile", model, recipe, "-o", tmp / "hostile-out"])
        must([shardc, "report", tmp / "hostile-out", "-o", tmp / "hostile.html"])
        html = (tmp / "hostile.html").read_text(encoding="utf-8")
        check(html.count("<script") == 2 and "<img" not in html and "a.&lt;script&gt;x&lt;/script&gt;.w" in html
              and "&lt;img src=x onerror=alert(1)&gt;" in html, "OUTDIR page: HTML in names is text")
        if (tmp / "gpt2-out" / "manifest.json").exists():
            bad_outdir_checks(shardc, tmp, tmp / "gpt2-out")
        else:
            check(False, "bad OUTDIRs: no compiled gpt2 OUTDIR to edit")
        search_page_checks(shardc, tmp)
    print(f"test_report_pages: {len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
