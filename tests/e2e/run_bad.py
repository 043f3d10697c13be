#!/usr/bin/env python3
"""Runs bad-input folders (tests/bad/<name>/) through `shardc validate --format json`
(or `shardc cost MODEL RECIPE --diag-format json` when `command` is "cost", `shardc search
MODEL --rules RECIPE --diag-format json ARGS` when it is "search", `shardc reshard ... --diag-format json` when `command` is "reshard", `shardc report
OUTDIR -o PAGE --diag-format json` when it is "report": `inputs` names the OUTDIR folder, `file`
a file in it, e.g. "out/plan.json"; a refused report writes no page).

    run_bad.py --shardc BIN [--sanitizer] [--timeout S] FOLDER [FOLDER ...]

Each folder holds a model file, a recipe file and `expect.json`:

    {"command": "validate" | "compile" | "cost" | "search", "exit": 1 | 2, "codes": ["E-..."],
     "file": "model" | "recipe", "line": N, "column": N,        # optional location
     "model": "model.json", "recipe": "recipe.yaml",             # optional file names
     "args": ["--strict"],                                       # optional extra arguments
     "generate": "params_1e6_json",                              # optional: built at test time
     "inputs": ["model_a.yaml", "recipe.yaml", ...]              # reshard: its inputs; `file`
                                                                 # may then name one of them
     "max_rss_mb": 2048}                                         # optional peak-RSS bound

Checks: the exit code; every expected code is reported; when `line`/`column`/`file` are
given, some diagnostic with the first expected code has that location (`file` compares the
diagnostic's file with the model or recipe path); every diagnostic has a non-empty code,
severity, message and hint (no exceptions, I/O errors included); stdout is valid JSON;
nothing is written to stderr that looks like a sanitizer report or a crash; the run ends
within --timeout seconds of CPU (default 20; a run blocked for 6x that on the wall clock
is killed: a hang uses no CPU) and, when `max_rss_mb` is given, its peak RSS stays
under it (skipped with --sanitizer: ASan's shadow memory inflates RSS, and time limits are
multiplied by 5).

`generate` makes inputs too big (or unrepresentable) for git in a temporary folder:
  params_1e6_json    model.json, a 10^6-param inventory (~60 MB) whose last param no rule
                     matches
  params_1e6_repeat  model.yaml, the same 10^6 params written as one `repeat` group
  params_flat_yaml   model.yaml, 10,001 params one by one (no `repeat`; W-FLAT-YAML), the
                     last one matched by no rule
  model_too_large    model.yaml, a sparse 300 MiB file (the input limit is 256 MiB)
  path_not_utf8      the folder's model file copied to a name with non-UTF-8 bytes
  checkpoint         a hostile safetensors checkpoint directory, `variant` in expect.json
                     (see hostile_checkpoint: header lengths past the file or 100 MB,
                     non-object JSON, overlapping / out-of-file / wrong-size offsets,
                     unknown dtype, names repeated across files, an index naming a missing
                     file, absurd config head counts, a safetensors file the index does
                     not name, a gap between tensors, trailing data bytes, a non-string
                     `__metadata__` value)
Exit status: 0 all pass, 1 a mismatch, 2 harness error. Stdlib only.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CRASH_RE = re.compile(r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
                      r"LeakSanitizer|terminate called|Segmentation fault|Aborted")


def generate(kind: str, folder: Path, tmp: Path, expect: dict) -> dict[str, Path]:
    """Writes generated inputs into tmp; returns overrides for 'model'/'recipe'."""
    n = 1_000_000
    if kind == "params_1e6_json":
        path = tmp / "model.json"
        with open(path, "w", encoding="utf-8") as f:
            f.write('{"format": "shardc.model/v1", "name": "big", "params": [\n')
            for i in range(n - 1):
                f.write('{"name": "layers.%d.w", "shape": [%d, 64]},\n' % (i, 2 + i % 7))
            f.write('{"name": "uncovered.w", "shape": [4]}\n]}\n')
        return {"model": path}
    if kind == "params_1e6_repeat":
        path = tmp / "model.yaml"
        path.write_text("format: shardc.model/v1\nname: big\nparams:\n"
                        f"  - repeat: {{i: [0, {n - 1}]}}\n    params:\n"
                        "      - {name: \"layers.{i}.w\", shape: [6, 64]}\n"
                        "  - {name: uncovered.w, shape: [4]}\n", encoding="utf-8")
        return {"model": path}
    if kind == "params_flat_yaml":
        path = tmp / "model.yaml"
        lines = ["format: shardc.model/v1", "name: flat", "params:"]
        lines += ['  - {name: "layers.%d.w", shape: [%d, 64]}' % (i, 2 + i % 7) for i in range(10_000)]
        lines.append("  - {name: uncovered.w, shape: [4]}")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return {"model": path}
    if kind == "model_too_large":
        path = tmp / "model.yaml"
        with open(path, "wb") as f:
            f.truncate(300 << 20)  # sparse: no disk space used
        return {"model": path}
    if kind == "path_not_utf8":
        src = folder / expect.get("model", "model.yaml")
        dst = Path(os.fsdecode(bytes(tmp) + b"/m\xff\xfe-model.yaml"))
        shutil.copyfile(src, dst)
        return {"model": dst}
    if kind == "checkpoint":
        path = tmp / "ckpt"
        hostile_checkpoint(expect["variant"], path)
        return {"model": path}
    raise ValueError(f"unknown generator {kind!r}")


def _st_file(path: Path, header: bytes | dict, data_bytes: int = 0,
             length: int | None = None) -> None:
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob) if length is None else length))
        f.write(blob)
    os.truncate(path, 8 + len(blob) + data_bytes)


def hostile_checkpoint(variant: str, d: Path) -> None:
    """A checkpoint directory broken in one way (the data parts are sparse holes)."""
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                               "num_attention_heads": 4,
                                               "num_key_value_heads": 2,
                                               "tie_word_embeddings": False}))
    ok = {"model.norm.weight": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]}}
    one = d / "model.safetensors"
    if variant == "length_past_file":
        _st_file(one, ok, 256, length=1 << 20)
    elif variant == "length_over_100mb":
        _st_file(one, ok, 150 << 20, length=120_000_000)  # inside the (sparse) file
    elif variant == "length_2_64":
        _st_file(one, ok, 256, length=(1 << 64) - 1)
    elif variant == "short_file":
        one.write_bytes(b"\x01\x02")
    elif variant == "not_object":
        _st_file(one, b"[1, 2, 3]")
    elif variant == "not_json":
        _st_file(one, b"{\"a\": {\"dtype\": \"F32\", ")
    elif variant == "offsets_overlap":
        _st_file(one, {"a.weight": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]},
                       "b.weight": {"dtype": "F32", "shape": [64], "data_offsets": [128, 384]}},
                 384)
    elif variant == "offsets_out_of_file":
        _st_file(one, {"a.weight": {"dtype": "F32", "shape": [1 << 40],
                                    "data_offsets": [0, 1 << 42]}}, 256)
    elif variant == "offsets_wrong_size":
        _st_file(one, {"a.weight": {"dtype": "BF16", "shape": [64, 64],
                                    "data_offsets": [0, 4096]}}, 8192)
    elif variant == "unknown_dtype":
        _st_file(one, {"a.weight": {"dtype": "F6_E3M2", "shape": [64],
                                    "data_offsets": [0, 64]}}, 64)
    elif variant == "duplicate_across_files":
        _st_file(d / "model-00001-of-00002.safetensors", ok, 256)
        _st_file(d / "model-00002-of-00002.safetensors", ok, 256)
    elif variant == "index_missing_file":
        _st_file(d / "model-00001-of-00002.safetensors", ok, 256)
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
            "model.norm.weight": "model-00001-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    elif variant == "config_absurd_heads":
        _st_file(one, ok, 256)
        (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                   "num_attention_heads": 1 << 62,
                                                   "num_key_value_heads": -3}))
    elif variant == "unindexed_file":
        # huggingface_hub#4725: a shard the index does not name (an MTP head) was skipped
        # silently; now W-CHECKPOINT names it and its tensor count.
        _st_file(d / "model-00001-of-00001.safetensors", ok, 256)
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
            "model.norm.weight": "model-00001-of-00001.safetensors"}}))
        _st_file(d / "model-mtp-of-00001.safetensors",
                 {"mtp.fc.weight": {"dtype": "BF16", "shape": [8, 16], "data_offsets": [0, 256]}}, 256)
    elif variant == "only_buffers":
        # tools/fuzz (fuzz_import, CI of 2026-12-03): a checkpoint whose only tensor is a rotary
        # inv_freq buffer imported as a model with no params, which the front end refuses.
        _st_file(one, {"model.rotary_emb.inv_freq": {"dtype": "F32", "shape": [32],
                                                     "data_offsets": [0, 128]}}, 128)
    elif variant == "offsets_gap":
        # trial A 1.4: a hole between two tensors (what a deleted header entry leaves);
        # safetensors refuses it ("invalid offset for tensor `b.weight`")
        _st_file(one, {"a.weight": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]},
                       "b.weight": {"dtype": "F32", "shape": [4], "data_offsets": [512, 528]}},
                 528)
    elif variant == "trailing_bytes":
        # bytes after the last tensor ("incomplete metadata, file not fully covered")
        _st_file(one, ok, 4096)
    elif variant == "metadata_not_string":
        # `__metadata__` is HashMap<String, String> ("invalid type: integer `5`")
        _st_file(one, {"__metadata__": {"format": "pt", "step": 5}, **ok}, 256)
    elif variant == "no_safetensors":
        pass
    else:
        raise ValueError(f"unknown checkpoint variant {variant!r}")


# A blocked run (a hang on a FIFO, a lock) uses no CPU, so the CPU-time limit alone would
# never end it: the wall clock kills the run at this many times the limit. On a loaded
# machine (CI's two test slots, or helpers building) wall time stretches, CPU time does not.
WALL_FACTOR = 6


def run_limited(cmd: list[str], timeout: float) -> tuple[int | None, str, str, float, int]:
    """Runs cmd; returns (exit status or None when it used more than `timeout` CPU seconds or
    ran longer than WALL_FACTOR x `timeout` wall seconds, stdout, stderr, CPU seconds, peak
    RSS KiB)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout * WALL_FACTOR, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from waiting again
        seconds = usage.ru_utime + usage.ru_stime
        if seconds > timeout:
            timed_out.set()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    code = None if timed_out.is_set() else proc.returncode
    return code, stdout, stderr, seconds, usage.ru_maxrss


def check_folder(folder: Path, shardc: str, timeout: float, sanitizer: bool) -> list[str]:
    problems: list[str] = []
    expect = json.loads((folder / "expect.json").read_text(encoding="utf-8"))
    command = expect.get("command", "validate")
    if command not in ("validate", "compile", "cost", "search", "reshard", "report"):
        return [f"unsupported command {command!r}"]
    with tempfile.TemporaryDirectory(prefix="shardc-bad-") as tmp_name:
        tmp = Path(tmp_name)
        paths = {"model": folder / expect.get("model", "model.yaml"),
                 "recipe": folder / expect.get("recipe", "recipe.yaml")}
        if "generate" in expect:
            paths.update(generate(expect["generate"], folder, tmp, expect))
        out_dir = tmp / "out"
        if command in ("validate", "compile"):
            cmd = [shardc, command, str(paths["model"]), str(paths["recipe"]), "--format",
                   "json"] + expect.get("args", [])
            if command == "compile":  # a refused compile writes nothing
                cmd += ["-o", str(out_dir)]
        elif command == "cost":  # diagnostics on stderr (--format is the report's)
            cmd = [shardc, "cost", str(paths["model"]), str(paths["recipe"]), "--diag-format",
                   "json"] + expect.get("args", [])
        elif command == "search":  # diagnostics on stderr; `args`: --world and the shape
            cmd = [shardc, "search", str(paths["model"]), "--rules", str(paths["recipe"]),
                   "--diag-format", "json"] + expect.get("args", [])
        elif command == "report":  # `inputs`: an OUTDIR in the folder; the page goes to tmp
            inputs = [folder / name for name in expect["inputs"]]
            paths.update({name: folder / name for name in expect["inputs"]})
            if "file" in expect:
                paths.setdefault(expect["file"], folder / expect["file"])
            cmd = [shardc, "report"] + [str(p) for p in inputs] + [
                "-o", str(tmp / "page.html"), "--diag-format", "json"] + expect.get("args", [])
        else:  # reshard: `inputs` are 2 plans or MODEL_A RECIPE_A MODEL_B RECIPE_B
            inputs = [folder / name for name in expect["inputs"]]
            paths.update({name: folder / name for name in expect["inputs"]})
            cmd = [shardc, "reshard"] + [str(p) for p in inputs] + [
                "--diag-format", "json"] + expect.get("args", [])
        limit = timeout * (5 if sanitizer else 1)
        code, stdout, stderr, seconds, rss_kib = run_limited(cmd, limit)
        wrote = (out_dir / "plan.json").exists() or (out_dir / "manifest.json").exists()
        if command == "compile" and code != 0 and wrote:
            problems.append(f"compile exited {code} but wrote {out_dir}")
        if command == "report" and code != 0 and (tmp / "page.html").exists():
            problems.append(f"report exited {code} on a bad OUTDIR but wrote a page")
    rss_mb = rss_kib / 1024
    print(f"  {folder.name}: exit {code}, {seconds:.2f} CPU s, peak RSS {rss_mb:.0f} MB")
    if code is None:
        return [f"did not finish within {limit:g} CPU s ({WALL_FACTOR * limit:g} s wall)"]
    if code < 0:
        problems.append(f"killed by signal {-code} ({signal.Signals(-code).name})")
    if CRASH_RE.search(stderr):
        problems.append("stderr looks like a crash or sanitizer report:\n" + stderr[-3000:])
    if code != expect["exit"]:
        problems.append(f"exit {code}, expected {expect['exit']}")
    if "max_rss_mb" in expect and not sanitizer and rss_mb > expect["max_rss_mb"]:
        problems.append(f"peak RSS {rss_mb:.0f} MB over the limit {expect['max_rss_mb']} MB")
    if command in ("compile", "cost", "search"):  # the summary or report on stdout, diagnostics on stderr
        stdout = stderr
    try:
        diags = json.loads(stdout)
    except json.JSONDecodeError as e:
        return problems + [f"stdout is not JSON ({e}): {stdout[:500]!r}"]
    if not isinstance(diags, list):
        return problems + ["stdout is not a JSON list of diagnostics"]
    for i, d in enumerate(diags):
        for field in ("code", "severity", "message", "hint"):
            if not isinstance(d.get(field), str) or not d[field].strip():
                problems.append(f"diagnostic {i} ({d.get('code')}) has an empty {field}: {d}")
    reported = [d.get("code") for d in diags]
    for c in expect["codes"]:
        if c not in reported:
            problems.append(f"expected code {c} not reported (got {sorted(set(reported))})")
    if any(k in expect for k in ("line", "column", "file")) and expect["codes"]:
        first = expect["codes"][0]
        want_file = None
        if "file" in expect:
            want_file = os.path.basename(os.fsencode(str(paths[expect["file"]])))
        candidates = [d for d in diags if d.get("code") == first]

        def at(d: dict) -> bool:
            if "line" in expect and d.get("line") != expect["line"]:
                return False
            if "column" in expect and d.get("column") != expect["column"]:
                return False
            if want_file is not None:
                got = os.path.basename(os.fsencode(d.get("file", "")))
                # Non-UTF-8 paths are reported with replacement characters: compare the
                # ASCII tail only.
                if got != want_file and not (want_file.isascii() is False and
                                             got.endswith(b"-model.yaml")):
                    return False
            return True

        if candidates and not any(at(d) for d in candidates):
            where = {k: expect[k] for k in ("file", "line", "column") if k in expect}
            got = [{k: d.get(k) for k in ("file", "line", "column")} for d in candidates]
            problems.append(f"{first}: expected at {where}, reported at {got}")
    # "says": substrings the first expected code's message + hint must contain (the words
    # a user needs, e.g. the entry that matched nothing); "never_says": text no diagnostic
    # may contain (e.g. a catch-all hint that would hide experts).
    if expect.get("says") and expect["codes"]:
        texts = [d.get("message", "") + "\n" + d.get("hint", "")
                 for d in diags if d.get("code") == expect["codes"][0]]
        for want in expect["says"]:
            if not any(want in t for t in texts):
                problems.append(f"{expect['codes'][0]}: no message says {want!r}: {texts}")
    for never in expect.get("never_says", []):
        for d in diags:
            if never in d.get("message", "") + d.get("hint", ""):
                problems.append(f"{d.get('code')} says {never!r}: {d}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--sanitizer", action="store_true",
                    help="sanitizer build: time limits x5, no RSS limits")
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args()
    if not os.access(args.shardc, os.X_OK):
        print(f"run_bad: {args.shardc} is not executable", file=sys.stderr)
        return 2
    failed = 0
    for folder in args.folders:
        if not (folder / "expect.json").is_file():
            print(f"run_bad: {folder}: no expect.json", file=sys.stderr)
            return 2
        problems = check_folder(folder, args.shardc, args.timeout, args.sanitizer)
        if problems:
            failed += 1
            print(f"FAIL {folder.name}")
            for p in problems:
                print("    " + p.replace("\n", "\n    "))
    print(f"run_bad: {len(args.folders) - failed}/{len(args.folders)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
