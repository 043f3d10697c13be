#!/usr/bin/env python3
"""The JSON Schemas in schemas/ (draft 2020-12) against every shipped input and real outputs.

    test_schemas.py [--part static|cli|all] [--shardc BIN]

static (no binary):
  * each schemas/*.schema.json is a valid draft 2020-12 schema, its regexes compile, every
    property has a description, and it has $schema/$id/title;
  * every shipped input validates: plans/*.model.yaml, plans/*.recipe.yaml,
    tests/cases/*/model.yaml|model.json|recipe.yaml, tests/data/models/*.params.json(.gz);
  * the docs/formats.md yaml blocks marked `<!-- example: model -->` / `<!-- example: recipe -->`
    validate (at least one of each must exist);
  * invalid documents FAIL validation (negative checks) and some edge spellings pass.
cli (needs --shardc):
  * `shardc schema NAME` prints exactly schemas/NAME.schema.json; an unknown name exits 2
    and lists the valid names;
  * every plans/*.recipe.yaml (ranks: a sample) and every valid tests/cases case (all ranks up
    to 64, else a sample) and the docs/formats.md example compile; plan.json and every rank file
    validate against the plan/rank schemas;
  * placement spellings: the recipe schema accepts exactly what `shardc validate` accepts.

Exit status: 0 pass, 1 failure, 2 setup error. Needs python3-jsonschema and python3-yaml.
"""
from __future__ import annotations

import argparse
import copy
import gzip
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import jsonschema
    import yaml
    from jsonschema import Draft202012Validator
except ImportError as exc:  # pragma: no cover
    print(f"setup error: {exc} (install python3-jsonschema python3-yaml; tools/common.sh does)")
    sys.exit(2)

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
ROOT = TESTS.parent
SCHEMAS = ROOT / "schemas"
NAMES = ["model", "recipe", "plan", "rank", "reshard", "manifest", "memory", "cost", "search"]
DATA_MODELS = TESTS / "data" / "models"
EXAMPLE_RE = re.compile(r"<!--\s*example:\s*(model|recipe)\s*-->\s*\n(?:\s*\n)*```yaml\n(.*?)```",
                        re.S)


class Failures:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.checked = 0

    def check(self, ok: bool, what: str) -> None:
        self.checked += 1
        if not ok:
            self.items.append(what)
            print("FAIL " + what, flush=True)


def load_schemas() -> dict[str, dict]:
    return {n: json.loads((SCHEMAS / f"{n}.schema.json").read_text()) for n in NAMES}


def validator(schema: dict) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


# Where each document kind keeps the schema of a param entry's `name` (see DedupValidator).
NAME_SCHEMA = {"plan": "#/$defs/fqn", "rank": "#/$defs/fqn",
               "model": "#/$defs/param/properties/name"}


class DedupValidator:
    """A validator that checks each distinct entry of a document's top-level `params` once.

    A real inventory or plan has tens of thousands of param entries that differ only in
    their name (`layers.0.…` … `layers.79.…` have the same shape, dtype, placements and
    shards), and pure-Python `jsonschema` spends minutes descending into each. The schema
    checks every entry of `params` against the same `items` subschema (no `prefixItems`,
    `contains` or `uniqueItems` there, and `minItems` is at most 1), so an entry's validity
    depends on the entry alone: entries equal except for `name` are validated once (the
    first of them, in the document), every name is validated on its own against the
    schema's name subschema, and entries already found valid in an earlier document of
    the same kind are not validated again. Everything else in the document is validated as
    it is. A document found invalid is validated again in full, so its errors are exactly
    the plain validator's.
    """

    def __init__(self, schema: dict, name_pointer: str) -> None:
        self.full = validator(schema)
        self.name = validator({"$defs": schema.get("$defs", {}), "$ref": name_pointer})
        self.seen: set[str] = set()  # keys of entries valid in an earlier document

    @staticmethod
    def key(entry) -> str:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            entry = {k: v for k, v in entry.items() if k != "name"}
        return json.dumps(entry, sort_keys=True, separators=(",", ":"))

    def is_valid(self, doc) -> bool:
        params = doc.get("params") if isinstance(doc, dict) else None
        if not isinstance(params, list) or len(params) < 2:
            return self.full.is_valid(doc)
        kept: list = []  # the entries validated in full
        keys: set[str] = set()
        for entry in params:
            k = self.key(entry)
            if k in self.seen or k in keys:
                if isinstance(entry, dict) and not self.name.is_valid(entry.get("name")):
                    return False
                continue
            keys.add(k)
            kept.append(entry)
        if not self.full.is_valid(dict(doc, params=kept)):
            return False
        self.seen.update(keys)
        return True

    def iter_errors(self, doc):
        """The errors of the whole document as it is (found again in full when there are any)."""
        if not self.is_valid(doc):
            yield from self.full.iter_errors(doc)


def validators(schemas: dict[str, dict]) -> dict:
    """One validator per schema name; the ones with big `params` lists deduplicate them."""
    return {n: DedupValidator(s, NAME_SCHEMA[n]) if n in NAME_SCHEMA else validator(s)
            for n, s in schemas.items()}


def errors_of(v: Draft202012Validator, doc) -> list[str]:
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))[:5]:
        path = "/".join(str(p) for p in e.absolute_path)
        out.append(f"at /{path}: {e.message[:300]}")
    return out


def expect_valid(f: Failures, v, doc, what: str) -> None:
    errs = errors_of(v, doc)
    f.check(not errs, f"{what} should validate:\n    " + "\n    ".join(errs))


def expect_invalid(f: Failures, v, doc, what: str) -> None:
    f.check(not v.is_valid(doc), f"{what} should FAIL validation but passes")


def read_doc(path: Path):
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            return json.load(fh)
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)
    return yaml.safe_load(text)


# ----------------------------------------------------------------------------- static

def walk_properties(node, where: str, out: list[str]) -> None:
    """Lists properties without a description (directly or next to their $ref)."""
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict):
            for key, sub in props.items():
                if not isinstance(sub, dict) or "description" not in sub:
                    out.append(f"{where}/properties/{key}")
        for key, sub in node.items():
            walk_properties(sub, f"{where}/{key}", out)
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            walk_properties(sub, f"{where}/{i}", out)


def regexes(node):
    if isinstance(node, dict):
        for key, sub in node.items():
            if key == "pattern" and isinstance(sub, str):
                yield sub
            elif key == "patternProperties" and isinstance(sub, dict):
                yield from sub.keys()
            yield from regexes(sub)
    elif isinstance(node, list):
        for sub in node:
            yield from regexes(sub)


def check_meta(f: Failures, schemas: dict[str, dict]) -> None:
    for name, s in schemas.items():
        try:
            Draft202012Validator.check_schema(s)
            ok = True
        except jsonschema.exceptions.SchemaError as exc:
            ok = False
            print(exc)
        f.check(ok, f"{name}.schema.json is a valid draft 2020-12 schema")
        f.check(s.get("$schema") == "https://json-schema.org/draft/2020-12/schema",
                f"{name}: $schema is draft 2020-12")
        f.check(s.get("$id") == f"https://shardc.dev/schemas/{name}.schema.json",
                f"{name}: $id")
        f.check(bool(s.get("title")) and bool(s.get("description")), f"{name}: title/description")
        missing: list[str] = []
        walk_properties(s, "#", missing)
        f.check(not missing, f"{name}: properties without description: {missing}")
        for rx in regexes(s):
            try:
                re.compile(rx)
                ok = True
            except re.error:
                ok = False
            f.check(ok, f"{name}: regex {rx!r} compiles")


def model_for_recipe(recipe: Path) -> Path | None:
    stem = recipe.name[: -len(".recipe.yaml")]
    models = sorted(recipe.parent.glob("*.model.yaml"), key=lambda p: -len(p.name))
    for m in models:
        base = m.name[: -len(".model.yaml")]
        if stem == base or stem.startswith(base + "-"):
            return m
    return None


def shipped_inputs() -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    out += [("model", p) for p in sorted((ROOT / "plans").glob("*.model.yaml"))]
    out += [("recipe", p) for p in sorted((ROOT / "plans").glob("*.recipe.yaml"))]
    for case in sorted((TESTS / "cases").iterdir()):
        if not case.is_dir():
            continue
        for name in ("model.yaml", "model.json"):
            if (case / name).exists():
                out.append(("model", case / name))
        if (case / "recipe.yaml").exists():
            out.append(("recipe", case / "recipe.yaml"))
    out += [("model", p) for p in sorted(DATA_MODELS.glob("*.params.json*"))]
    return out


def doc_examples() -> list[tuple[str, str]]:
    """The (kind, YAML text) of every block of docs/formats.md marked as an example."""
    text = (ROOT / "docs/formats.md").read_text()
    return [(m.group(1), m.group(2)) for m in EXAMPLE_RE.finditer(text)]


TINY_MODEL = {"format": "shardc.model/v1", "name": "t", "dtype": "bfloat16",
              "params": [{"name": "a.weight", "shape": [4, 4]}]}
TINY_RECIPE = {"format": "shardc.recipe/v1", "mesh": [{"name": "tp", "size": 2}],
               "rules": [{"match": "**", "placements": {"tp": "Shard(0)"}}]}


def with_(doc: dict, **changes) -> dict:
    d = copy.deepcopy(doc)
    d.update(changes)
    return d


def model_negatives() -> list[tuple[str, dict]]:
    p = TINY_MODEL["params"][0]
    return [
        ("param entry with an unknown key", with_(TINY_MODEL, params=[dict(p, shapes=[4])])),
        ("param entry without shape", with_(TINY_MODEL, params=[{"name": "a.weight"}])),
        ("unknown dtype float128", with_(TINY_MODEL, params=[dict(p, dtype="float128")])),
        ("unknown default dtype", with_(TINY_MODEL, dtype="bfloat17")),
        ("negative extent", with_(TINY_MODEL, params=[dict(p, shape=[4, -1])])),
        ("non-integer extent", with_(TINY_MODEL, params=[dict(p, shape=[4, 2.5])])),
        ("name with a space", with_(TINY_MODEL, params=[dict(p, name="a weight")])),
        ("name with an empty segment", with_(TINY_MODEL, params=[dict(p, name="a..weight")])),
        ("requires_grad not a bool", with_(TINY_MODEL, params=[dict(p, requires_grad="yes")])),
        ("wrong format", with_(TINY_MODEL, format="shardc.model/v2")),
        ("no params", {k: v for k, v in TINY_MODEL.items() if k != "params"}),
        ("repeat range of three numbers",
         with_(TINY_MODEL, params=[{"repeat": {"i": [0, 2, 4]}, "params": [dict(p, name="l.{i}.w")]}])),
        ("repeat group with an extra key",
         with_(TINY_MODEL, params=[{"repeat": {"i": [0, 2]}, "name": "x",
                                    "params": [dict(p, name="l.{i}.w")]}])),
        ("repeat without variables",
         with_(TINY_MODEL, params=[{"repeat": {}, "params": [p]}])),
        ("repeat variable not an identifier",
         with_(TINY_MODEL, params=[{"repeat": {"1i": [0, 2]}, "params": [dict(p, name="l.{1i}.w")]}])),
        ("tied pair of three", with_(TINY_MODEL, tied=[["a", "b", "c"]])),
        ("tied_weights value not a string", with_(TINY_MODEL, tied_weights={"b": ["a"]})),
        ("num_attention_heads 0", with_(TINY_MODEL, attributes={"num_attention_heads": 0})),
    ]


def recipe_negatives() -> list[tuple[str, dict]]:
    r = TINY_RECIPE
    rule = r["rules"][0]
    return [
        ("unknown top-level key", with_(r, meshes=r["mesh"])),
        ("no mesh", {"format": "shardc.recipe/v1", "rules": r["rules"]}),
        ("empty mesh", with_(r, mesh=[])),
        ("mesh size 0", with_(r, mesh=[{"name": "tp", "size": 0}])),
        ("mesh axis with an extra key", with_(r, mesh=[{"name": "tp", "size": 2, "dim": 0}])),
        ("axis name not an identifier", with_(r, mesh=[{"name": "t-p", "size": 2}])),
        ("placement Shard(x)", with_(r, rules=[dict(rule, placements={"tp": "Shard(x)"})])),
        ("placement Shard without dim", with_(r, rules=[dict(rule, placements={"tp": "Shard"})])),
        ("placement Partial()", with_(r, rules=[dict(rule, placements={"tp": "Partial()"})])),
        ("placement partial", with_(r, rules=[dict(rule, placements={"tp": "partial"})])),
        ("placement Replicate(0)", with_(r, rules=[dict(rule, placements={"tp": "Replicate(0)"})])),
        ("placement not a string", with_(r, rules=[dict(rule, placements={"tp": 0})])),
        ("rule without placements", with_(r, rules=[{"match": "**"}])),
        ("rule with an unknown key", with_(r, rules=[dict(rule, stage=0)])),
        ("empty match list", with_(r, rules=[dict(rule, match=[])])),
        ("uneven ceil", with_(r, uneven="ceil")),
        ("experts match without {E}",
         with_(r, experts=[{"match": "l.{L}.e.{X}.w", "stack": "l.{L}.e", "placements": {}}])),
        ("experts entry without stack",
         with_(r, experts=[{"match": "l.{L}.e.{E}.w", "placements": {}}])),
        ("tied yes", with_(r, tied="yes")),
        ("tied pair of one", with_(r, tied=[["a"]])),
        ("pipeline unknown key", with_(r, pipeline={"axis": "tp", "num_stages": 2})),
        ("pipeline stages empty list", with_(r, pipeline={"stages": []})),
        ("fsdp without shard", with_(r, fsdp={"dim": 0})),
        ("fsdp unknown key", with_(r, fsdp={"shard": "tp", "reshard": True})),
        ("fsdp expert_dim 2", with_(r, fsdp={"shard": "tp", "expert_dim": 2})),
        ("fsdp shard axis twice", with_(r, fsdp={"shard": ["tp", "tp"]})),
        ("buffer kind unknown", with_(r, buffers=[{"kind": "zero3"}])),
        ("buffer without kind", with_(r, buffers=[{"alignment_bytes": 512}])),
        ("muon buffer with units", with_(r, buffers=[{"kind": "muon_allgather", "units": ["**"]}])),
        ("muon alignment 0", with_(r, buffers=[{"kind": "muon_allgather", "alignment_bytes": 0}])),
        ("fsdp2 buffer without units", with_(r, buffers=[{"kind": "fsdp2_allgather"}])),
        ("wrong format", with_(r, format="shardc.recipe/v2")),
    ]


PLACEMENTS_OK = ["Shard(0)", "Shard(-1)", "Shard(+1)", " Shard( 1 ) ", "Shard(dim=0)",
                 "shard(0)", "shard(-2)", "Replicate()", "Replicate", "replicate", "replicate()",
                 "Replicate ( )"]
PLACEMENTS_BAD = ["Shard", "Shard()", "Shard(x)", "Shard(0,1)", "SHARD(0)", "Replicate(0)",
                  "Partial()", "Partial(sum)", "partial", "Partial(avg)", "", "S(0)",
                  "Shard(0))", "StridedShard(0)", "_StridedShard(0)", "_StridedShard(0, 2)"]


def recipe_with_placement(text: str) -> dict:
    return with_(TINY_RECIPE, rules=[{"match": "**", "placements": {"tp": text}}])


def check_static(f: Failures, schemas: dict[str, dict]) -> None:
    check_meta(f, schemas)
    vs = validators(schemas)
    inputs = shipped_inputs()
    f.check(len([1 for k, _ in inputs if k == "recipe"]) >= 10, "found the shipped recipes")
    f.check(len([1 for k, _ in inputs if k == "model"]) >= 10, "found the shipped models")
    for kind, path in inputs:
        expect_valid(f, vs[kind], read_doc(path), f"{path.relative_to(ROOT)} ({kind})")
    examples = doc_examples()
    kinds = sorted({k for k, _ in examples})
    f.check(kinds == ["model", "recipe"],
            f"docs/formats.md has examples marked `<!-- example: model|recipe -->` (found {kinds})")
    for i, (kind, text) in enumerate(examples):
        expect_valid(f, vs[kind], yaml.safe_load(text), f"docs/formats.md example #{i + 1} ({kind})")
    expect_valid(f, vs["model"], TINY_MODEL, "tiny model")
    expect_valid(f, vs["recipe"], TINY_RECIPE, "tiny recipe")
    for what, doc in model_negatives():
        expect_invalid(f, vs["model"], doc, f"model: {what}")
    for what, doc in recipe_negatives():
        expect_invalid(f, vs["recipe"], doc, f"recipe: {what}")
    for text in PLACEMENTS_OK:
        expect_valid(f, vs["recipe"], recipe_with_placement(text), f"placement {text!r}")
    for text in PLACEMENTS_BAD:
        expect_invalid(f, vs["recipe"], recipe_with_placement(text), f"placement {text!r}")
    # Edge spellings shardc accepts.
    ok_models = [
        ("dtype aliases", with_(TINY_MODEL, dtype="BF16", params=[
            {"name": "a", "shape": [2], "dtype": "F32"}, {"name": "b", "shape": [2], "dtype": "F8_E4M3"},
            {"name": "c", "shape": [2], "dtype": "torch.float16"}, {"name": "d", "shape": []}])),
        ("nested repeat, several variables", with_(TINY_MODEL, params=[
            {"repeat": {"L": [0, 2]}, "params": [
                {"repeat": {"E": [0, 4], "P": [0, 2]},
                 "params": [{"name": "l.{L}.e{E}.p{P}.w", "shape": [3, 4]}]}]}])),
        ("inventory form", {"model": "inv", "dtype": "float32", "tie_word_embeddings": True,
                            "tied_weights": {"lm_head.weight": "embed.weight"},
                            "params": [{"name": "embed.weight", "shape": [8, 2]},
                                       {"name": "lm_head.weight", "shape": [8, 2]}],
                            "param_count": 32}),
    ]
    for what, doc in ok_models:
        expect_valid(f, vs["model"], doc, f"model: {what}")
    # The deduplicating validator still sees every entry: a bad name on an entry that
    # duplicates an earlier one, and a bad entry after its valid twins.
    twins = [{"name": f"w{i}.weight", "shape": [4, 4]} for i in range(3)]
    expect_invalid(f, vs["model"], with_(TINY_MODEL, params=twins + [{"name": "x..y", "shape": [4, 4]}]),
                   "model: bad name on a duplicate entry")
    bad = with_(TINY_MODEL, params=twins + [{"name": "z", "shape": [-4, 4]}])
    errs = errors_of(vs["model"], bad)
    f.check(bool(errs) and errs == errors_of(vs["model"].full, bad),
            f"model: a bad entry after its twins gives the plain validator's errors (got {errs})")
    ok_recipes = [
        ("null sections", with_(TINY_RECIPE, experts=None, buffers=None, tied=None)),
        ("tied none", with_(TINY_RECIPE, tied="none")),
        ("explicit stages", with_(TINY_RECIPE, pipeline={"axis": "tp", "stages": [["a.*"], "**"]})),
        ("fsdp lists", with_(TINY_RECIPE, fsdp={"shard": ["tp"], "dim": -1, "expert_dim": 1})),
        ("match list and per-rule uneven", with_(TINY_RECIPE, rules=[
            {"match": ["a.*", "b"], "placements": None, "uneven": "balanced"}])),
    ]
    for what, doc in ok_recipes:
        expect_valid(f, vs["recipe"], doc, f"recipe: {what}")


# ----------------------------------------------------------------------------- cli

def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def world_size(recipe: Path) -> int:
    n = 1
    for axis in yaml.safe_load(recipe.read_text())["mesh"]:
        n *= int(axis["size"])
    return n


def sample(world: int, all_up_to: int = 0) -> list[int]:
    if world <= all_up_to:
        return list(range(world))
    return sorted({r for r in (0, 1, 17, world // 2, world - 1) if 0 <= r < world})


def resolve_model(case: Path, rel: str, tmp: Path) -> Path:
    direct = case / rel
    if direct.exists():
        return direct
    base = Path(rel).name
    if (DATA_MODELS / base).exists():
        return DATA_MODELS / base
    gz = DATA_MODELS / (base + ".gz")
    out = tmp / base
    out.write_bytes(gzip.decompress(gz.read_bytes()))
    return out


PLAN_PARAMS_CHECKED = 200
PLAN_FULL_CHECK_BYTES = 16 << 20


def compile_and_validate(f: Failures, shardc: str, vs, model: Path, recipe: Path,
                         ranks: list[int], out: Path, label: str) -> tuple[dict, dict] | None:
    cmd = [shardc, "compile", str(model), str(recipe), "-o", str(out), "--force", "--quiet",
           "--ranks", ",".join(map(str, ranks))]
    proc = run(cmd)
    f.check(proc.returncode == 0, f"{label}: compile exited {proc.returncode}\n$ {' '.join(cmd)}\n"
            f"{proc.stderr[-2000:]}")
    if proc.returncode != 0:
        return None
    plan = json.loads((out / "plan.json").read_text())
    # A plan of every-rank-distinct shards (Qwen3-235B on 512 ranks: 38 MB) takes minutes in
    # the pure-Python validator: above 16 MB check a copy with its first PLAN_PARAMS_CHECKED
    # params (every param kind of a shipped plan appears in its first layers).
    checked = plan
    if (out / "plan.json").stat().st_size > PLAN_FULL_CHECK_BYTES:
        checked = dict(plan, params=plan["params"][:PLAN_PARAMS_CHECKED])
    expect_valid(f, vs["plan"], checked, f"{label}: plan.json")
    files = sorted((out / "ranks").glob("rank-*.json"))
    f.check(len(files) == len(ranks), f"{label}: {len(ranks)} rank files written (got {len(files)})")
    for path in files:
        doc = json.loads(path.read_text())
        expect_valid(f, vs["rank"], doc, f"{label}: ranks/{path.name}")
        note_undocumented_buffer_keys(vs["rank_closed"], doc, f"{label}: ranks/{path.name}")
    manifest = json.loads((out / "manifest.json").read_text())
    expect_valid(f, vs["manifest"], manifest, f"{label}: manifest.json")
    f.check([e["rank"] for e in manifest["rank_files"]["files"]] == sorted(ranks),
            f"{label}: manifest.json lists exactly the rank files written")
    LAST_MANIFEST.clear()
    LAST_MANIFEST.update(manifest)
    cmd = [shardc, "memory", str(model), str(recipe), "--format", "json", "--quiet",
           "--ranks", ",".join(map(str, ranks))]
    proc = run(cmd)
    f.check(proc.returncode == 0, f"{label}: memory exited {proc.returncode}\n$ {' '.join(cmd)}")
    if proc.returncode == 0:
        memory = json.loads(proc.stdout)
        expect_valid(f, vs["memory"], memory, f"{label}: shardc memory --format json")
        # The same figures in the rank files, plan.json and `shardc memory`.
        by_rank = {e["rank"]: e["bytes"] for e in memory["ranks"]}
        for path in files:
            doc = json.loads(path.read_text())
            f.check(doc.get("memory") == by_rank.get(doc["rank"]),
                    f"{label}: ranks/{path.name} memory == shardc memory --ranks")
        total = plan["summary"].get("per_rank_memory", {}).get("total", {})
        f.check(total.get("max") == memory["peak"]["bytes"],
                f"{label}: plan.json per_rank_memory.total.max == shardc memory peak")
    print(f"ok   {label}: plan.json + {len(files)} rank files + manifest.json", flush=True)
    return plan, json.loads(files[0].read_text()) if files else {}


LAST_MANIFEST: dict = {}


def check_manifest_mutations(f: Failures, vs) -> None:
    m = dict(LAST_MANIFEST)
    vm = vs["manifest"]
    for what, doc in [
        ("wrong format", mutated(m, ["format"], "shardc.plan/v1")),
        ("unknown top-level key", mutated(m, ["extra"], 1)),
        ("world_size 0", mutated(m, ["world_size"], 0)),
        ("plan sha256 not hex", mutated(m, ["plan", "sha256"], "xyz")),
        ("plan bytes negative", mutated(m, ["plan", "bytes"], -1)),
        ("rank file without sha256", mutated(m, ["rank_files", "files", 0, "sha256"],
                                             delete=True)),
        ("rank file path outside ranks/", mutated(m, ["rank_files", "files", 0, "path"],
                                                  "../etc/passwd")),
        ("no rank_files", mutated(m, ["rank_files"], delete=True)),
    ]:
        expect_invalid(f, vm, doc, f"manifest.json mutation: {what}")


def mutated(doc: dict, path: list, value=None, delete: bool = False) -> dict:
    d = copy.deepcopy(doc)
    node = d
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return d


MUON_LAYOUT = {"kind": "muon_allgather", "alignment_bytes": 512, "max_batch_numel": 1 << 29,
               "groups": [{
                   "key": "dense ndim=2 tp:0", "mesh": "dense", "replicate_axes": ["dp"],
                   "replicate_coord": [0],
                   "stages": [{"axes": ["tp"], "tensor_dim": 0, "ranks": "0-1", "index": 0}],
                   "params": [{"param": 0, "owner": [0], "split_sizes": [[[2, 2]]]}],
                   "batches": [{"dtype": "bfloat16", "params": [0], "total_numel": [256]}]}],
               "not_communicated": [1]}
FSDP2_LAYOUT = {"kind": "fsdp2_allgather", "units": [{
    "name": "", "mesh": "dense", "units": "elements", "ranks": "0,1", "index": 0, "total": 8,
    "total_bytes": 16, "output_shape": [2, 8],
    "params": [{"param": 0, "shard_dim": 0, "offset": 0, "padded_numel": 8,
                "unsharded_shape": [4, 4]}]}],
    "not_communicated": [], "a_field_added_later": True}


def check_output_mutations(f: Failures, vs, plan: dict, rank: dict) -> None:
    """Invalid outputs fail; the buffer layouts contract §6.3 describes pass."""
    vp, vr = vs["plan"], vs["rank"]
    p0 = ["params", 0]
    for what, doc in [
        ("wrong format", mutated(plan, ["format"], "shardc.plan/v2")),
        ("unknown top-level key", mutated(plan, ["extra"], 1)),
        ("world_size 0", mutated(plan, ["world_size"], 0)),
        ("bad sha256", mutated(plan, ["inputs", "model", "sha256"], "xyz")),
        ("param without shards", mutated(plan, p0 + ["shards"], delete=True)),
        ("param with no shard", mutated(plan, p0 + ["shards"], [])),
        ("non-canonical dtype", mutated(plan, p0 + ["dtype"], "bf16")),
        ("negative dim label", mutated(plan, p0 + ["placements", 0], "Shard(-1)")),
        ("DSL label", mutated(plan, p0 + ["placements", 0], "replicate")),
        ("bad rank set", mutated(plan, p0 + ["shards", 0, "ranks"], "0-")),
        ("rank set with spaces", mutated(plan, p0 + ["shards", 0, "ranks"], "0, 1")),
        ("negative offset", mutated(plan, p0 + ["shards", 0, "global_offset", 0], -1)),
        ("stacked_from a string", mutated(plan, p0 + ["stacked_from"], "x")),
        ("rule kind unknown", mutated(plan, p0 + ["rule", "kind"], "default")),
        ("mesh unknown", mutated(plan, p0 + ["mesh"], "moe")),
        ("summary without max", mutated(plan, ["summary", "per_rank_param_bytes", "max"],
                                        delete=True)),
    ]:
        expect_invalid(f, vp, doc, f"plan.json mutation: {what}")
    for what, doc in [
        ("wrong format", mutated(rank, ["format"], "shardc.plan/v1")),
        ("unknown top-level key", mutated(rank, ["extra"], 1)),
        ("buffer without kind", mutated(rank, ["buffers"], [{}])),
        ("buffer kind unknown", mutated(rank, ["buffers"], [{"kind": "zero3"}])),
        ("buffer not an object", mutated(rank, ["buffers"], ["muon_allgather"])),
        ("muon split_sizes negative", mutated(rank, ["buffers"], [mutated(
            MUON_LAYOUT, ["groups", 0, "params", 0, "split_sizes"], [[[-1, 1], [5, 1]]])])),
        ("muon split run with count 0", mutated(rank, ["buffers"], [mutated(
            MUON_LAYOUT, ["groups", 0, "params", 0, "split_sizes"], [[[2, 0]]])])),
        ("muon param by name", mutated(rank, ["buffers"], [mutated(
            MUON_LAYOUT, ["groups", 0, "params", 0, "param"], "a.weight")])),
        ("muon stage ranks as a list", mutated(rank, ["buffers"], [mutated(
            MUON_LAYOUT, ["groups", 0, "stages", 0, "ranks"], [0, 1])])),
        ("muon derived field written", mutated(rank, ["buffers"], [mutated(
            MUON_LAYOUT, ["groups", 0, "params", 0, "rank_shapes"], [[2, 4], [2, 4]])])),
        ("fsdp2 ranks malformed", mutated(rank, ["buffers"], [mutated(
            FSDP2_LAYOUT, ["units", 0, "ranks"], "0-")])),
        ("fsdp2 units not elements/bytes", mutated(rank, ["buffers"], [mutated(
            FSDP2_LAYOUT, ["units", 0, "units"], "rows")])),
        ("negative numel", mutated(rank, p0 + ["numel"], -1)),
        ("param without alias_of", mutated(rank, p0 + ["alias_of"], delete=True)),
        ("coords without expert", mutated(rank, ["coords", "expert"], delete=True)),
        ("coordinate negative", mutated(rank, ["coords", "dense", "tp"], -1)),
        ("totals without num_params", mutated(rank, ["totals", "num_params"], delete=True)),
    ]:
        expect_invalid(f, vr, doc, f"rank file mutation: {what}")
    expect_valid(f, vr, mutated(rank, ["buffers"], [MUON_LAYOUT, FSDP2_LAYOUT]),
                 "rank file with contract §6.3 buffer layouts")
    expect_valid(f, vr, mutated(rank, p0 + ["tied_copy_of"], "x.weight"),
                 "rank file param with tied_copy_of")


BUFFER_DEFS = ["buffer", "muon_group", "muon_stage", "muon_param", "muon_batch", "fsdp2_unit",
               "fsdp2_param"]
NOTED: set[str] = set()


def closed_rank_schema(rank: dict) -> dict:
    """The rank schema with the (still open) buffer layout objects closed, nested ones too."""
    def close(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for sub in node.values():
                close(sub)
        elif isinstance(node, list):
            for sub in node:
                close(sub)
    s = copy.deepcopy(rank)
    for name in BUFFER_DEFS:
        close(s["$defs"][name])
    return s


def note_undocumented_buffer_keys(v_closed, doc: dict, what: str) -> None:
    """Buffer layouts may carry keys the schema does not describe yet: a note, not a failure."""
    for e in v_closed.iter_errors(doc):
        if e.validator == "additionalProperties":
            key = "/".join(str(p) for p in e.absolute_path if not isinstance(p, int))
            msg = f"NOTE {what}: undocumented buffer key(s) at {key}: {e.message}"
            if key not in NOTED:
                NOTED.add(key)
                print(msg, flush=True)


def check_cli(f: Failures, schemas: dict[str, dict], shardc: str) -> None:
    vs = validators(schemas)
    vs["rank_closed"] = DedupValidator(closed_rank_schema(schemas["rank"]), NAME_SCHEMA["rank"])
    for name in NAMES:
        proc = run([shardc, "schema", name])
        text = (SCHEMAS / f"{name}.schema.json").read_text()
        f.check(proc.returncode == 0 and proc.stdout == text,
                f"`shardc schema {name}` prints schemas/{name}.schema.json exactly "
                f"(exit {proc.returncode})")
    proc = run([shardc, "schema", "nope"])
    f.check(proc.returncode == 2 and all(n in proc.stderr for n in NAMES),
            f"`shardc schema nope` exits 2 listing the valid names (exit {proc.returncode}, "
            f"stderr {proc.stderr.strip()!r})")

    with tempfile.TemporaryDirectory(prefix="shardc-schemas-") as tmp_str:
        tmp = Path(tmp_str)
        for recipe in sorted((ROOT / "plans").glob("*.recipe.yaml")):
            model = model_for_recipe(recipe)
            f.check(model is not None, f"{recipe.name}: found its model in plans/")
            if model is None:
                continue
            name = recipe.name[: -len(".recipe.yaml")]
            compile_and_validate(f, shardc, vs, model, recipe, sample(world_size(recipe)),
                                 tmp / "plan" / name, f"plans/{name}")
        for case in sorted((TESTS / "cases").iterdir()):
            exp_path = case / "expected.json"
            if not exp_path.exists():
                continue
            exp = json.loads(exp_path.read_text())
            if exp.get("expect_error"):
                continue
            recipe = case / exp.get("recipe", "recipe.yaml")
            model = resolve_model(case, exp.get("model", "model.yaml"), tmp)
            compile_and_validate(f, shardc, vs, model, recipe, sample(world_size(recipe), 64),
                                 tmp / "case" / case.name, f"cases/{case.name}")
        # The docs/formats.md example compiles and its outputs validate.
        examples = dict(doc_examples())
        if {"model", "recipe"} <= examples.keys():
            (tmp / "tiny.model.yaml").write_text(examples["model"])
            (tmp / "tiny.recipe.yaml").write_text(examples["recipe"])
            got = compile_and_validate(f, shardc, vs, tmp / "tiny.model.yaml",
                                       tmp / "tiny.recipe.yaml",
                                       sample(world_size(tmp / "tiny.recipe.yaml"), 64),
                                       tmp / "doc-example", "docs/formats.md example")
            if got:
                check_output_mutations(f, vs, *got)
                check_manifest_mutations(f, vs)
        # The recipe schema's placement pattern agrees with the real parser.
        (tmp / "p.model.json").write_text(json.dumps(TINY_MODEL))
        for text in PLACEMENTS_OK + PLACEMENTS_BAD:
            rpath = tmp / "p.recipe.yaml"
            rpath.write_text(json.dumps(recipe_with_placement(text)))  # JSON is YAML
            proc = run([shardc, "validate", str(tmp / "p.model.json"), str(rpath),
                        "--format", "json"])
            accepted = proc.returncode == 0
            f.check(proc.returncode in (0, 1, 2), f"validate on placement {text!r} did not crash")
            schema_ok = vs["recipe"].is_valid(recipe_with_placement(text))
            f.check(accepted == schema_ok,
                    f"placement {text!r}: shardc validate exit {proc.returncode}, schema "
                    f"{'accepts' if schema_ok else 'rejects'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["static", "cli", "all"], default="all")
    ap.add_argument("--shardc", help="shardc binary (needed for --part cli/all)")
    args = ap.parse_args()
    if args.part != "static" and not args.shardc:
        print("setup error: --shardc BIN is needed for the cli part")
        return 2
    try:
        schemas = load_schemas()
    except (OSError, json.JSONDecodeError) as exc:
        print(f"FAIL cannot read the schemas: {exc}")
        return 1
    f = Failures()
    if args.part in ("static", "all"):
        check_static(f, schemas)
    if args.part in ("cli", "all"):
        check_cli(f, schemas, args.shardc)
    if f.items:
        print(f"\n{len(f.items)} of {f.checked} checks failed")
        return 1
    print(f"\nall {f.checked} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
