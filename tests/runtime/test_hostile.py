"""The adapter refuses what `shardc verify` / `validate` refuse (issue 24 items 1, 7).

Each folder of the hostile-input campaign that concerns the adapter
(`adapter_checkpoint_reader`, `adapter_rankset_unbounded`, `fifo_hang`; the
READMEs are summarized at each test) is reproduced here on the tiny Llama-like
checkpoint of that campaign (tests/hostile/make_tiny_ckpt.py and
tests/hostile/tiny.recipe.yaml, shared with the campaign's folders), plus the other triggers of the same kinds. Every refusal must
be a typed error (`PlanError` / `CheckpointError`) naming the file and the
field or tensor, raised at once: anything that could block (FIFOs) runs in a
child process with a deadline. The tampered OUTDIRs are also run through
`shardc verify`, which must refuse each of them too (one corpus, both readers).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import shardc_runtime as sr

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE = os.path.join(os.path.dirname(HERE), "hostile")  # tests/hostile
Q = "model.layers.0.self_attn.q_proj.weight"
EMBED = "model.embed_tokens.weight"


@pytest.fixture(scope="module")
def tiny(shardc: str, tmp_path_factory: Any) -> tuple[str, str]:
    """(checkpoint dir, its compiled OUTDIR)."""
    work = tmp_path_factory.mktemp("hostile")
    ck, out = str(work / "ck"), str(work / "out")
    subprocess.run([sys.executable, os.path.join(HOSTILE, "make_tiny_ckpt.py"), ck], check=True)
    r = subprocess.run([shardc, "-q", "compile", ck, os.path.join(HOSTILE, "tiny.recipe.yaml"),
                        "-o", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return ck, out


def header_of(ck: str) -> tuple[dict[str, Any], bytes]:
    raw = open(os.path.join(ck, "model.safetensors"), "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_ckpt(ck: str, d: str, header: dict[str, Any] | str, data: bytes) -> str:
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(ck, "config.json"), d)
    hb = (header if isinstance(header, str) else json.dumps(header)).encode()
    hb += b" " * (-len(hb) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)
    return d


def variant(ck: str, d: str, edit: Callable[[dict[str, Any]], None]) -> str:
    header, data = header_of(ck)
    edit(header)
    return write_ckpt(ck, d, header, data)


# --- adapter_checkpoint_reader: the reader enforces what shardc's header reader does ---

def test_clean_load_reads_only_its_bytes(tiny: tuple[str, str]) -> None:
    ck, out = tiny
    me = sr.OutDir(out).rank(0)
    loaded = sr.load_rank(me, ck)
    assert loaded.bytes_read == sum(p.nbytes for p in me.storage_params())


@pytest.mark.parametrize("name,edit,message", [
    ("negative_data_offsets", lambda h, b, e: h[Q].update(data_offsets=[-64, -64 + e - b]),
     "not \\[begin, end\\] with non-negative integers"),
    ("overlapping_data_offsets", lambda h, b, e: h[Q].update(data_offsets=[0, e - b]),
     "overlap tensor 'model.embed_tokens.weight'"),
    ("reversed_data_offsets", lambda h, b, e: h[Q].update(data_offsets=[e, b]), "begin <= end"),
    ("offsets_past_the_data", lambda h, b, e: h[Q].update(data_offsets=[b + 1 << 40, e + 1 << 40]),
     "outside the data section"),
    ("float_offsets", lambda h, b, e: h[Q].update(data_offsets=[float(b), float(e)]),
     "non-negative integers"),
    ("size_not_numel", lambda h, b, e: h[Q].update(shape=[64, 63]), "needs"),
    ("extent_product_2_62", lambda h, b, e: h[Q].update(shape=[1 << 31, 1 << 31, 2]), "2\\^62"),
    ("negative_extent", lambda h, b, e: h[Q].update(shape=[-64, -64]), "non-negative integers"),
    ("unknown_dtype", lambda h, b, e: h[Q].update(dtype="F6_E3M2"), "unknown dtype 'F6_E3M2'"),
    ("entry_not_object", lambda h, b, e: h.update({Q: [1, 2]}), "not an object"),
])
def test_bad_header_refused(tiny: tuple[str, str], tmp_path: Any, name: str,
                            edit: Callable[[dict[str, Any], int, int], None], message: str) -> None:
    ck, out = tiny
    begin, end = header_of(ck)[0][Q]["data_offsets"]
    d = variant(ck, str(tmp_path / name), lambda h: edit(h, begin, end))
    me = sr.OutDir(out).rank(0)
    with pytest.raises(sr.CheckpointError, match=message) as info:
        sr.load_rank(me, d)
    assert info.value.tensor == Q and info.value.file.endswith("model.safetensors")


def test_shape_differs_from_plan(tiny: tuple[str, str], tmp_path: Any) -> None:
    """q_proj [32, 128] instead of the plan's [64, 64] (same bytes): refused, not read
    as half rows of the other layout."""
    ck, out = tiny
    d = variant(ck, str(tmp_path / "wider"), lambda h: h[Q].update(shape=[32, 128]))
    with pytest.raises(sr.CheckpointError, match=r"has shape \[32, 128\], the plan's .* needs "
                                                 r"\[64, 64\]") as info:
        sr.load_rank(sr.OutDir(out).rank(0), d)
    assert info.value.tensor == Q


def test_dtype_differs_from_plan(tiny: tuple[str, str], tmp_path: Any) -> None:
    ck, out = tiny
    d = variant(ck, str(tmp_path / "f16"), lambda h: h[Q].update(dtype="F16"))
    with pytest.raises(sr.CheckpointError, match="is float16, the plan's"):
        sr.load_rank(sr.OutDir(out).rank(0), d)


def test_duplicate_header_key(tiny: tuple[str, str], tmp_path: Any) -> None:
    ck, out = tiny
    header, data = header_of(ck)
    text = json.dumps(header)
    text = text[:-1] + ", " + json.dumps(Q) + ": " + json.dumps(header[Q]) + "}"
    d = write_ckpt(ck, str(tmp_path / "dup"), text, data)
    with pytest.raises(sr.CheckpointError, match="duplicate key"):
        sr.Checkpoint(d)


def test_header_longer_than_file(tiny: tuple[str, str], tmp_path: Any) -> None:
    ck, _ = tiny
    d = str(tmp_path / "long")
    os.makedirs(d)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", (1 << 61)) + b"{}")  # e.g. a Git LFS pointer read as a header
    with pytest.raises(sr.CheckpointError, match="header length"):
        sr.Checkpoint(d)


@pytest.mark.parametrize("target", ["../elsewhere/model.safetensors", "ABSOLUTE", "sub/x.safetensors",
                                    "..", ""])
def test_index_outside_the_checkpoint(tiny: tuple[str, str], tmp_path: Any, target: str) -> None:
    """weight_map values name plain files of the checkpoint directory only."""
    ck, out = tiny
    header, data = header_of(ck)
    elsewhere = write_ckpt(ck, str(tmp_path / "elsewhere"), header, bytes(len(data)))
    if target == "ABSOLUTE":
        target = os.path.join(elsewhere, "model.safetensors")
    d = write_ckpt(ck, str(tmp_path / "index"), header, data)
    index = os.path.join(d, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"weight_map": {t: target for t in header if t != "__metadata__"}}, f)
    for path in (d, index):
        with pytest.raises(sr.CheckpointError, match="not a plain file name") as info:
            sr.load_rank(sr.OutDir(out).rank(0), path)
        assert info.value.file == index and info.value.tensor


def test_index_names_the_wrong_file(tiny: tuple[str, str], tmp_path: Any) -> None:
    ck, _ = tiny
    header, data = header_of(ck)
    d = write_ckpt(ck, str(tmp_path / "index"), header, data)
    shutil.copy(os.path.join(d, "model.safetensors"), os.path.join(d, "other.safetensors"))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {t: "model.safetensors" for t in header if t != "__metadata__"}}, f)
    sr.Checkpoint(d)  # only the listed file is read: the copy beside it is not a duplicate
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": dict({t: "model.safetensors" for t in header if t != "__metadata__"},
                                      **{Q: "other.safetensors"}), "x": 1}, f)
    with pytest.raises(sr.CheckpointError, match="also in"):  # the tensor is in both files
        sr.Checkpoint(d)


# --- adapter_rankset_unbounded: rank strings are bounded, never expanded ---

def tamper(out: str, dst: str, edit: Callable[[dict[str, Any]], None],
           rel: str = "ranks/rank-0.json") -> str:
    """Copy OUTDIR `out` to `dst`, edit one JSON file, re-sign manifest.json."""
    shutil.copytree(out, dst)
    path = os.path.join(dst, rel)
    doc = json.load(open(path))
    edit(doc)
    with open(path, "w") as f:
        f.write(json.dumps(doc, separators=(",", ":")))
    if rel != "manifest.json":
        m = json.load(open(os.path.join(dst, "manifest.json")))
        data = open(path, "rb").read()
        entry = m["plan"] if rel == "plan.json" else next(
            f for f in m["rank_files"]["files"] if f["path"] == rel)
        entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
        with open(os.path.join(dst, "manifest.json"), "w") as f:
            json.dump(m, f)
    return dst


def verify_refuses(shardc: str, outdir: str) -> str:
    r = subprocess.run([shardc, "verify", outdir], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, f"shardc verify accepted {outdir}:\n{r.stdout}"
    return r.stderr


def set_unit_ranks(ranks: Any) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc["buffers"][0]["units"][0].update(ranks=ranks)


@pytest.mark.parametrize("ranks,message", [
    ("0-10000000000", "out of range"),
    ("0-9223372036854775806", "out of range"),
    ("0-99999999999999999999", "out of range"),
    ("-2,0", "not a non-negative integer"),
    ("2-0", "reversed range"),
    ("0-6:0", "step 0"),
    ("0,,2", "not a non-negative integer"),
    ([0, 2], "instead of a rank string"),
])
def test_rank_strings(shardc: str, tiny: tuple[str, str], tmp_path: Any, ranks: Any,
                      message: str) -> None:
    _, out = tiny
    bad = tamper(out, str(tmp_path / "t"), set_unit_ranks(ranks))
    started = time.monotonic()
    with pytest.raises(sr.PlanError, match=message) as info:
        sr.OutDir(bad).rank(0)
    assert time.monotonic() - started < 1.0
    assert "rank-0.json: buffers[0].units[0].ranks" in str(info.value)
    verify_refuses(shardc, bad)


def test_rank_string_over_2_24_items() -> None:
    with pytest.raises(sr.PlanError, match="more than 2\\^24 ranks"):
        sr.parse_rank_list("0-16777215,0", 1 << 25)


# --- manifests: duplicate, escaping or absurd entries ---

def dup_first(m: dict[str, Any]) -> None:
    files = m["rank_files"]["files"]
    files.insert(1, dict(files[0]))
    m["rank_files"]["count"] += 1


@pytest.mark.parametrize("edit,message", [
    (dup_first, "not strictly ascending"),
    (lambda m: m["rank_files"]["files"][1].update(path="../../etc/rank-1.json"),
     "not the file name of rank 1"),
    (lambda m: m["rank_files"]["files"][1].update(path="/tmp/rank-1.json"),
     "not the file name of rank 1"),
    (lambda m: m["plan"].update(path="../plan.json"), "is not 'plan.json'"),
    (lambda m: m.update(world_size=1 << 40), "world_size"),
    (lambda m: m.update(world_size=0), "world_size"),
    (lambda m: m["rank_files"].update(count=3), "count says 3"),
    (lambda m: m["rank_files"].update(ranks="0-2"), "not the set of the listed files"),
    (lambda m: m["rank_files"].update(ranks="0-10000000000"), "out of range"),
    (lambda m: m["rank_files"]["files"][0].update(sha256="x" * 64), "64 lowercase hex"),
    (lambda m: m["rank_files"].update(files={"a": 1}), "instead of a list"),
])
def test_manifest_refused(shardc: str, tiny: tuple[str, str], tmp_path: Any,
                          edit: Callable[[dict[str, Any]], None], message: str) -> None:
    _, out = tiny
    bad = tamper(out, str(tmp_path / "t"), edit, "manifest.json")
    with pytest.raises(sr.PlanError, match=message):
        sr.OutDir(bad).rank(1)
    verify_refuses(shardc, bad)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(buffers={"kind": "fsdp2_allgather"}), "buffers: dict instead of a list"),
    (lambda d: d["params"][0].update(global_offset=[-1, 0]), "global_offset\\[0\\]"),
    (lambda d: d["params"][0].update(local_shape=[2000, 64], padded_shape=[2000, 64],
                                     numel=128000, bytes=256000), "leaves global shape"),
    (lambda d: d["params"][0].update(dtype="float4"), "unknown dtype 'float4'"),
    (lambda d: d["params"].append(dict(d["params"][0])), "listed twice"),
    (lambda d: d["params"][0].update(name="not.a.param"), "not a param of plan.json"),
    (lambda d: d["buffers"][0]["units"][0]["params"][0].update(param=99), "param: 99"),
    (lambda d: d.update(world_size=9), "world_size 9, plan.json says 4"),
    # Fields shardc always writes are required (no defaults for forms it never writes).
    (lambda d: d["params"][0].pop("padded_shape"), "missing `padded_shape`"),
    (lambda d: d["params"][0].pop("numel"), "missing `numel`"),
    (lambda d: d["params"][0].pop("alias_of"), "missing `alias_of`"),
    (lambda d: d.pop("stage"), "missing `stage`"),
    (lambda d: d.pop("buffers"), "missing `buffers`"),
    (lambda d: d["buffers"][0]["units"][0].pop("mesh"), "missing `mesh`"),
])
def test_rank_file_refused(shardc: str, tiny: tuple[str, str], tmp_path: Any,
                           edit: Callable[[dict[str, Any]], None], message: str) -> None:
    _, out = tiny
    bad = tamper(out, str(tmp_path / "t"), edit)
    with pytest.raises(sr.PlanError, match=message) as info:
        sr.OutDir(bad).rank(0)
    assert "rank-0.json" in str(info.value)
    verify_refuses(shardc, bad)


# --- fifo_hang: never block on a file ---

def refuses_at_once(code: str, message: str) -> None:
    """Run `code` in a child python (it may block: killed after 20 s); it must
    raise an error containing `message` within a second."""
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert time.monotonic() - started < 15, "blocked"
    assert r.returncode == 1 and message in r.stderr, r.stderr


def test_fifo_manifest(tiny: tuple[str, str], tmp_path: Any) -> None:
    _, out = tiny
    d = str(tmp_path / "out")
    shutil.copytree(out, d)
    os.remove(os.path.join(d, "manifest.json"))
    os.mkfifo(os.path.join(d, "manifest.json"))
    refuses_at_once(f"import shardc_runtime as sr; sr.OutDir({d!r})", "manifest.json is a FIFO")


def test_fifo_rank_file(tiny: tuple[str, str], tmp_path: Any) -> None:
    _, out = tiny
    d = str(tmp_path / "out")
    shutil.copytree(out, d)
    os.remove(os.path.join(d, "ranks", "rank-2.json"))
    os.mkfifo(os.path.join(d, "ranks", "rank-2.json"))
    refuses_at_once(f"import shardc_runtime as sr; sr.OutDir({d!r}).rank(2)",
                    "rank-2.json is a FIFO")


@pytest.mark.parametrize("name,make", [
    ("zz.safetensors", os.mkfifo),
    ("model.safetensors.index.json", os.mkfifo),
    ("zz.safetensors", lambda p: os.symlink("/dev/zero", p)),
    ("zz.safetensors", os.mkdir),
])
def test_nonregular_checkpoint_member(tiny: tuple[str, str], tmp_path: Any, name: str,
                                      make: Callable[[str], None]) -> None:
    ck, _ = tiny
    d = str(tmp_path / "ck")
    shutil.copytree(ck, d)
    make(os.path.join(d, name))
    kind = {"mkfifo": "is a FIFO", "mkdir": "is a directory"}.get(
        getattr(make, "__name__", ""), "is a character device")
    refuses_at_once(f"import shardc_runtime as sr; sr.Checkpoint({d!r})", f"{name} {kind}")


def test_loaded_values_unchanged_by_validation(tiny: tuple[str, str]) -> None:
    """The clean checkpoint's values: make_tiny_ckpt writes (arange + base) % 30000."""
    ck, out = tiny
    loaded = sr.load_rank(sr.OutDir(out).rank(0), ck)
    me = loaded.info
    q = me.params[Q]
    want = ((np.arange(64 * 64) + 1000) % 30000).astype("<i2").reshape(64, 64)
    got = loaded.local(Q)
    assert got.tobytes() == want[q.global_offset[0]:q.global_offset[0] + q.local_shape[0]].tobytes()


# --- verify_fields_unchecked (adapter side): rank files and plan.json must agree ---

LM_HEAD = "lm_head.weight"


def param_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in doc["params"] if p["name"] == name)


@pytest.mark.parametrize("rel,edit,message", [
    ("ranks/rank-0.json", lambda d: param_of(d, LM_HEAD).update(alias_of=Q),
     "plan.json's alias_of is 'model.embed_tokens.weight'"),
    ("ranks/rank-0.json", lambda d: param_of(d, LM_HEAD).update(alias_of=None),
     "alias_of None / tied_copy_of None, plan.json's alias_of is"),
    ("ranks/rank-0.json", lambda d: param_of(d, LM_HEAD).update(tied_copy_of=EMBED),
     "alias_of 'model.embed_tokens.weight' / tied_copy_of 'model.embed_tokens.weight'"),
    ("plan.json", lambda d: param_of(d, Q).update(alias_of=EMBED),
     "q_proj.weight: alias_of None / tied_copy_of None, plan.json's alias_of is"),
    ("plan.json", lambda d: param_of(d, Q).update(mesh="expert"),
     "mesh: 'expert' is not a mesh of the plan"),
    ("ranks/rank-0.json", lambda d: param_of(d, Q)["global_offset"].__setitem__(0, 1),
     "which plan.json lists for no shard of this rank"),
    ("plan.json", lambda d: param_of(d, Q)["shards"][0].update(ranks="2-3"),
     "which plan.json lists for no shard of this rank"),
])
def test_rank_file_disagrees_with_plan(tiny: tuple[str, str], tmp_path: Any, rel: str,
                                       edit: Callable[[dict[str, Any]], None], message: str) -> None:
    """A re-pointed alias would load q_proj into lm_head; a shard plan.json does not
    list for the rank, a tie plan.json does not declare, a mesh the rank lacks: refused."""
    _, out = tiny
    bad = tamper(out, str(tmp_path / "t"), edit, rel)
    with pytest.raises(sr.PlanError, match=message):
        sr.OutDir(bad).rank(0)


@pytest.fixture(scope="module")
def experts(shardc: str, tmp_path_factory: Any) -> str:
    work = tmp_path_factory.mktemp("experts")
    out = str(work / "out")
    case = os.path.join(HERE, "cases", "ep_efsdp")
    r = subprocess.run([shardc, "-q", "compile", os.path.join(case, "model.yaml"),
                        os.path.join(case, "recipe.yaml"), "-o", out], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return out


W1 = "model.layers.0.mlp.experts.w1"


def swap_sources(d: dict[str, Any]) -> None:
    src = param_of(d, W1)["stacked_from"]["sources"]
    src[0], src[1] = src[1], src[0]


@pytest.mark.parametrize("edit,message", [
    (swap_sources, "not consecutive in order"),
    (lambda d: param_of(d, W1)["stacked_from"]["sources"].__setitem__(1, "model.embed.weight"),
     "sources of different depth"),
    (lambda d: param_of(d, W1)["stacked_from"]["sources"].__setitem__(
        1, "model.layers.0.mlp.experts.1.w2.weight"), "differ in 2 name segments"),
    (lambda d: param_of(d, W1)["stacked_from"].update(count=65), "count 65 for 6 sources"),
])
def test_stacked_sources(experts: str, tmp_path: Any, edit: Callable[[dict[str, Any]], None],
                         message: str) -> None:
    """Swapped or renamed expert sources would load expert 1 into slot 0 (or the
    embedding into an expert): refused."""
    bad = tamper(experts, str(tmp_path / "t"), edit, "plan.json")
    with pytest.raises(sr.PlanError, match=message):
        sr.OutDir(bad).rank(0)
    sr.OutDir(experts).rank(0)  # the untouched plan reads


# --- the tampered-output corpus (tests/tampered/cases.json) through the adapter ---
# The same corpus `shardc verify` runs (tests/e2e/run_tampered.py, CTest tampered/corpus):
# every case verify refuses on the files alone, the adapter refuses too, with a typed error
# naming the edited file. Cases verify refuses only with an argument the adapter has no
# counterpart for say so here; the adapter then loads them and must return exactly the
# untampered rank files (files outside the manifest are never read).

REPO = os.path.dirname(os.path.dirname(HERE))
TAMPERED = os.path.join(REPO, "tests", "tampered", "cases.json")
VERIFY_ONLY = {
    "--strict": "files the manifest does not list (extra, duplicate, foreign, symbolic links): "
                "the adapter reads only listed files, by their digests",
    "--ranks": "a verify command-line argument",
}
# Verify arguments that change only how verify checks (which params it simulates element by
# element), not what it refuses: the adapter must refuse such a case all the same.
SIMULATION_ONLY = {"--max-elements"}
# local_attributes (head and vocab ranges) are derived from the model's head counts and
# vocabulary size, and requires_grad from the model, none of which the outputs carry: only
# `verify --against MODEL RECIPE` re-derives them. The adapter loads these (asserted),
# returning the edited fields.
NEEDS_INPUTS = {"local-attributes-q-heads-against", "local-attributes-vocab-against",
                "plan-requires-grad-against"}


def _tampered_cases() -> list[dict[str, Any]]:
    with open(TAMPERED, encoding="utf-8") as f:
        cases: list[dict[str, Any]] = json.load(f)["cases"]
    return cases


@pytest.fixture(scope="module")
def tampered_base(shardc: str, tmp_path_factory: Any) -> tuple[str, Any]:
    """(the OUTDIR run_tampered.py compiles, the run_tampered module)."""
    # The corpus's own edit and re-sign code (tests/e2e/run_tampered.py, not a package).
    spec = importlib.util.spec_from_file_location(
        "run_tampered", os.path.join(REPO, "tests", "e2e", "run_tampered.py"))
    assert spec is not None and spec.loader is not None
    run_tampered = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_tampered)
    out = str(tmp_path_factory.mktemp("tampered") / "base")
    subprocess.run([shardc, "compile", str(run_tampered.MODEL), str(run_tampered.RECIPE), "-o",
                    out, "--quiet"], check=True, capture_output=True, timeout=300)
    return out, run_tampered


def _load_all(out: str) -> list[Any]:
    """plan.json and every rank file as the adapter returns them."""
    d = sr.OutDir(out)
    return [d.plan] + [d.rank(r).doc for r in range(d.world_size)]


def test_tampered_corpus_is_covered() -> None:
    """Every case the adapter is not asked to refuse has its reason here."""
    for case in _tampered_cases():
        if case["exit"] == 0 or case["name"] in NEEDS_INPUTS:
            continue
        flags = [a for a in case.get("args", []) if a.startswith("--")]
        assert all(f in VERIFY_ONLY or f in SIMULATION_ONLY for f in flags), (case["name"], flags)


@pytest.mark.parametrize("case", _tampered_cases(), ids=lambda c: str(c["name"]))
def test_tampered_corpus(tampered_base: tuple[str, Any], tmp_path: Any,
                         case: dict[str, Any]) -> None:
    base, rt = tampered_base
    out = tmp_path / "t"
    shutil.copytree(base, out, symlinks=True)
    for edit in case["edits"]:
        rt.apply_edit(out, edit)
    if case.get("resign", True):
        rt.resign(out)
    verify_only = case["exit"] == 0 or any(a in VERIFY_ONLY for a in case.get("args", []))
    if verify_only or case["name"] in NEEDS_INPUTS:
        got = _load_all(str(out))
        want = _load_all(base)
        assert (got == want) == verify_only, case["name"]
        return
    with pytest.raises((sr.PlanError, sr.CheckpointError)) as info:
        _load_all(str(out))
    edited = {os.path.basename(e["file"]) for e in case["edits"]}
    assert any(name in str(info.value) for name in edited), (edited, str(info.value))


# --- a training script's mistakes: OutDir.rank's argument, the model, the launch ---

@pytest.mark.parametrize("rank,message", [
    ("3", "rank must be an int, got str '3' (convert it: int(os.environ['RANK']))"),
    (3.0, "rank must be an int, got float 3.0"),
    (True, "rank must be an int, got bool True"),
    (None, "rank must be an int, got NoneType None"),
])
def test_rank_not_an_int(tiny: tuple[str, str], rank: Any, message: str) -> None:
    out = sr.OutDir(tiny[1])
    with pytest.raises(TypeError) as info:
        out.rank(rank)
    assert str(info.value) == message
    numpy_rank: Any = np.int64(1)
    assert out.rank(numpy_rank).rank == 1  # numpy integers are integers


def test_rank_outside_the_plan_names_the_launch(tiny: tuple[str, str]) -> None:
    out = sr.OutDir(tiny[1])
    with pytest.raises(sr.PlanError) as info:
        out.rank(out.world_size)
    assert (f"rank {out.world_size} outside world size {out.world_size} of "
            f"{tiny[1]}/plan.json" in str(info.value)), info.value
    assert "a launch of more processes than" in str(info.value)


def test_no_process_group(tiny: tuple[str, str], tmp_path: Any) -> None:
    """Before init_process_group, device_meshes and distribute_model say so and start no
    process group, even with torchrun's variables set (torch's init_device_mesh would
    start one)."""
    ck, out = tiny
    code = f"""
import os, torch, torch.distributed as dist
from shardc_runtime import OutDir
from shardc_runtime.torch import device_meshes, distribute_model
out = OutDir({out!r})
for call in (lambda: device_meshes(out), lambda: distribute_model(torch.nn.Linear(2, 2), out, 0, {ck!r})):
    try:
        call()
        print("ACCEPTED")
    except RuntimeError as ex:
        print("REFUSED", ex)
print("INITIALIZED", dist.is_initialized())
"""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="29511", PYTHONPATH=os.path.join(HERE, "..", "..", "tools", "python"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "INITIALIZED False", r.stdout
    for caller, line in zip(("device_meshes", "distribute_model"), lines):
        assert line == (f"REFUSED {caller}: torch.distributed is not initialized: call "
                        "torch.distributed.init_process_group(...) on every rank first (the "
                        "adapter does not start a process group; under torchrun, "
                        "init_process_group('nccl' or 'gloo') reads RANK and WORLD_SIZE)"), line


def _hf_plans(shardc: str, work: str) -> dict[str, str]:
    """A tiny Llama checkpoint, untied and tied (save_pretrained, nothing downloaded), and
    plans of 4 ranks (dp_shard 2 x tp 2; both), 2 and 8 ranks (untied)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    import harness
    base = open(os.path.join(HERE, "cases", "hf_llama", "recipe.yaml")).read()
    assert "{name: dp_shard, size: 4}" in base
    recipes = {"big": base, "four": base.replace("{name: dp_shard, size: 4}",
                                                  "{name: dp_shard, size: 2}"),
               "small": base.replace("{name: dp_shard, size: 4}", "{name: dp_shard, size: 1}")}
    spec: dict[str, str] = {}
    for tied in (False, True):
        config = LlamaConfig(vocab_size=37, hidden_size=16, intermediate_size=24,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=64, tie_word_embeddings=tied)
        torch.manual_seed(0)
        ckpt = os.path.join(work, "tied" if tied else "untied")
        AutoModelForCausalLM.from_config(config).save_pretrained(ckpt, safe_serialization=True)
        for name, text in recipes.items():
            if tied and name != "four":
                continue
            recipe = os.path.join(work, f"{name}.recipe.yaml")
            with open(recipe, "w") as f:
                f.write(text)
            key = ("tied_" if tied else "") + ("outdir" if name == "four" else name)
            spec[key] = harness.compile_plan(shardc, ckpt, recipe,
                                             os.path.join(work, f"{key}.out"))
        spec["tied_ckpt" if tied else "ckpt"] = ckpt
    return spec


@pytest.mark.distributed
def test_model_and_launch_misuse(shardc: str, tmp_path: Any) -> None:
    """4 gloo processes (misuse.py): distribute_model and apply_fully_shard refuse a module
    that is not the plan's (shape, missing layer, ties both ways, dtype, a frozen param,
    an extra param) naming FQN and both values and changing nothing; apply_fully_shard
    refuses dp_mesh in the wrong form; a 2- and an 8-rank plan on 4 processes are refused
    on every rank, naming both world sizes and the OUTDIR."""
    import harness
    work = str(tmp_path)
    spec = _hf_plans(shardc, work)
    ok, outputs = harness.launch(sys.executable, 4, {"tasks": [
        dict(spec, kind="misuse", name="misuse")]}, work, timeout=180)
    text = "\n".join(f"--- rank {r} ---\n{o}" for r, o in enumerate(outputs))
    assert ok, "\n".join(line for line in text.splitlines() if "MISMATCH" in line) or text
    labels = [f"distribute_model: {c}" for c in (
        "wider MLP", "fewer layers", "tied model, untied plan", "untied model, tied plan",
        "bf16 model", "frozen param", "extra param")] + [
        f"apply_fully_shard: {c}" for c in (
            "wider MLP", "fewer layers", "a DeviceMesh", "key 'default'", "the tp axis")] + [
        f"world {w}: {c}" for w in (2, 8) for c in ("device_meshes", "distribute_model")]
    for label in labels:
        for rank in range(4):
            assert f"REFUSED {label} on rank {rank}: " in text, (label, rank, text)
    for rank in range(4):
        assert f"rank {rank}: misuse checks done" in text
