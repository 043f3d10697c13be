#!/usr/bin/env python3
"""shardc benchmark at cluster scale: the helper behind tools/bench (stdlib only).

    bench.py --shardc BIN [--quick] [--runs N] [--warmup N] [--output FILE] [--tmp DIR] [--keep]
             [--baseline BIN] [--only-parse] [--only GROUPS]

Every input is generated into a temporary directory from what ships in the repository
(a user's clone has nothing else): DeepSeek-V3 from tests/data/models/DeepSeek-V3.params.json.gz
(gunzipped), Llama-3.1-405B from plans/llama-3.1-405b.model.yaml, and recipes scaled from
the shipped ones by editing only the mesh sizes.

Each benchmark runs `--warmup` untimed times, then `--runs` timed times; it reports the
median wall time, min-max, and the peak RSS (max over runs) from `/usr/bin/time -v` (or
wait4() rusage when GNU time is missing). shardc runs with `-vv`: its debug log lines are
time-stamped as they arrive on stderr, which splits a run into phases (start-up + read,
model parse, recipe parse + plan, output) at negligible cost.

Benchmarks (full mode; --quick shrinks the rank-file benchmark to 64 ranks, runs 1, no
warm-up, and marks shrunk rows' targets n/a):
  A  validate / compile --no-rank-files, DeepSeek-V3 (JSON inventory) on 16,384 ranks
     (pp 16 x dp_shard 128 x tp 8; experts pp 16 x efsdp 16 x ep 64); `memory` and
     `validate --budget` (the per-rank memory report) on the same plan; `memory` with the
     training shape (A5) and `cost`, the communication per step per rank (A6)
  B  validate / compile --no-rank-files, Llama-3.1-405B on 16,384 ranks (shipped plan)
  F  rank-file size: DeepSeek-V3 on 16,384 ranks with both buffer layouts, 64 sampled
     rank files (median KB; target <= 30 KB)
  C  compile with every rank file, Llama-3.1-405B on 2,048 ranks (dp 256 x tp 8), against
     writing the same bytes: `cat plan.json ranks/* > fresh/all` into a fresh directory on
     the same filesystem (one stream: the pure cost of the bytes, the strict baseline), and
     for information a per-file copy done in-process (open/write/close per file, so the
     file-creation cost is included without fork/exec per file). Page cache only: neither
     shardc nor the baselines fsync; `sync` runs (untimed) before every run. Every run
     writes a new directory (deleted at the end of the group), because creating thousands
     of inodes right after deleting thousands is several times slower on ext4 without a
     journal (unless free space falls below 3 outputs + 8 GB); -j 1 (C2) and the
     per-file copy (C4) run at most 3 times. C5 is the target's measurement: shardc and
     the per-file copy of its own output interleaved (A B A B ...), the median of the
     per-pair ratios (target <= 1.5x), so load drift between pairs cancels.
  D  parsing: `validate` of the ~5 MB DeepSeek-V3 JSON inventory and of a flat YAML model
     with the same params, each with a trivial recipe (one rule `**`, placements {}, a
     1-rank mesh): whole-command time and MB/s, plus the model-parse phase from -vv.
     With --baseline BIN (e.g. main's build), BIN runs the same commands interleaved
     (A B, B A, ...; rows D1-base, D2-base) and each row gives the median of the per-pair
     time ratios; --only-parse runs group D alone.
  --only GROUPS runs only the rows of the named groups (letters, comma-separated: `--only C`
  is the rank-file group C1-C5; F is both the rank-file size row and the import rows).
  E  scaling: `validate` DeepSeek-V3 on 1k, 4k, 16k, 64k and 256k ranks (dp_shard and
     efsdp scaled; pp 16, tp 8, ep 64 fixed; --quick: to 16k only).
  R  `shardc reshard` DeepSeek-V3 from the shipped 2,048-rank plan to 16,384 ranks and
     back (plan.json inputs compiled untimed first; summary only), from the MODEL RECIPE
     pairs, and with the JSON listing of one 1,024-rank stage (--quick: only the MODEL
     RECIPE form, to 4,096 ranks).
  F  checkpoint import: `shardc import` of DeepSeek-V3 written as its real hub layout
     (tests/e2e/checkpoint_util.py, sparse files): F1 the FP8 layout, 163 files, 90,427
     tensors (F8_E4M3 weights + F32 weight_scale_inv) with the index and config.json;
     F2 the bf16 layout (45,395 tensors). Headers only, so a few MB are read.

Exit status: 0 when every command ran and exited 0 (targets missed do not fail the run;
the table says so), 1 when a command failed, 2 on usage errors.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import gzip
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLANS = REPO / "plans"
DATA_MODELS = REPO / "tests" / "data" / "models"
GNU_TIME = "/usr/bin/time"

DS_RECIPE = PLANS / "deepseek-v3-pp16-ep64.recipe.yaml"
LLAMA_MODEL = PLANS / "llama-3.1-405b.model.yaml"
LLAMA_RECIPE = PLANS / "llama-3.1-405b-dp2048-tp8.recipe.yaml"
TRIVIAL_RECIPE = """\
# shardc bench: trivial recipe (one rule, nothing sharded, 1 rank): isolates parsing.
format: shardc.recipe/v1
mesh:
  - {name: dp, size: 1}
rules:
  - match: "**"
    placements: {}
"""

# Debug log lines (src/driver/session.cpp) that mark phase boundaries.
PHASE_MARKS = {
    "read_model": re.compile(r"\] read model "),
    "read_recipe": re.compile(r"\] read recipe "),
    "parsed": re.compile(r"\] parsed \d+ params"),
    "planned": re.compile(r"\] planned \d+ params"),
}


# --------------------------------------------------------------------------- inputs


def scale_mesh(text: str, sizes: dict[str, int]) -> str:
    """Sets `{name: AXIS, size: N}` entries (in mesh and expert_mesh) to the given sizes."""
    for axis, size in sizes.items():
        pat = re.compile(r"(\{\s*name:\s*" + re.escape(axis) + r"\s*,\s*size:\s*)\d+")
        text, n = pat.subn(lambda m: m.group(1) + str(size), text)
        if n != 1:
            raise ValueError(f"scale_mesh: axis {axis!r} found {n} times (expected 1)")
    return text


def write_recipe(tmp: Path, base: Path, sizes: dict[str, int], world: int) -> Path:
    text = scale_mesh(base.read_text(), sizes)
    out = tmp / f"{base.name[: -len('.recipe.yaml')]}-w{world}.recipe.yaml"
    desc = ", ".join(f"{k} {v}" for k, v in sizes.items())
    out.write_text(f"# shardc bench: {base.name} scaled to {world} ranks ({desc})\n" + text)
    return out


def ds_sizes(world: int) -> dict[str, int]:
    """DeepSeek-V3 mesh sizes for `world` ranks: pp 16 x dp_shard x tp 8; pp 16 x efsdp x ep 64."""
    if world % 1024:
        raise ValueError(f"DeepSeek-V3 world size {world} is not a multiple of 1024")
    return {"dp_shard": world // 128, "efsdp": world // 1024}


def flat_yaml_model(inv: dict) -> str:
    """The inventory as a flat shardc.model/v1 YAML (block style, no repeat, every dtype)."""
    out = ["# shardc bench: flat YAML model (no repeat), generated from the JSON inventory",
           "format: shardc.model/v1",
           f"name: {inv.get('model', 'model')}",
           f"dtype: {inv.get('dtype', 'bfloat16')}",
           "attributes:"]
    for k, v in inv.get("attributes", {}).items():
        out.append(f"  {k}: {json.dumps(v)}")
    out.append("params:")
    for p in inv["params"]:
        out.append(f"  - name: {p['name']}")
        out.append(f"    shape: [{', '.join(str(d) for d in p['shape'])}]")
        out.append(f"    dtype: {p.get('dtype', inv.get('dtype', 'bfloat16'))}")
    tied = inv.get("tied_weights") or {}
    if tied:
        out.append("tied:")
        for alias, source in tied.items():
            out.append(f"  - [{source}, {alias}]")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- running


class RunError(Exception):
    pass


def parse_gnu_time(text: str) -> tuple[int | None, float | None]:
    """(peak RSS KiB, user + system CPU seconds) from `/usr/bin/time -v` output."""
    rss = cpu = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Maximum resident set size (kbytes):"):
            rss = int(line.rsplit(":", 1)[1])
        elif line.startswith(("User time (seconds):", "System time (seconds):")):
            cpu = (cpu or 0.0) + float(line.rsplit(":", 1)[1])
    return rss, cpu


def run_once(cmd: list[str], tmp: Path) -> dict:
    """One timed run: wall seconds, peak RSS (KiB), phase timestamps, stderr tail."""
    time_file = tmp / "gnu-time.txt"
    use_gnu = os.access(GNU_TIME, os.X_OK)
    full = ([GNU_TIME, "-v", "-o", str(time_file)] if use_gnu else []) + cmd
    marks: dict[str, float] = {}
    tail: list[str] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    assert proc.stderr is not None
    for line in proc.stderr:
        now = time.perf_counter() - t0
        for key, pat in PHASE_MARKS.items():
            if key not in marks and pat.search(line):
                marks[key] = now
        tail.append(line)
        if len(tail) > 40:
            del tail[:20]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    rss = None
    if use_gnu:
        rss, _ = parse_gnu_time(time_file.read_text(errors="replace"))
        time_file.unlink(missing_ok=True)
    if rss is None:
        rss = usage.ru_maxrss  # KiB on Linux
    # CPU from wait4(): microseconds (GNU time prints 1/100 s); it includes the reaped
    # grandchild when GNU time wraps the command.
    cpu = usage.ru_utime + usage.ru_stime
    if proc.returncode != 0:
        raise RunError(f"exit {proc.returncode}: {' '.join(cmd)}\n" + "".join(tail[-15:]))
    marks["end"] = wall
    return {"wall": wall, "cpu": cpu, "rss_kb": rss, "marks": marks}


def sync() -> None:
    try:
        os.sync()
    except (AttributeError, OSError):
        pass


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path):
        self.args, self.tmp = args, tmp
        self.rows: list[dict] = []
        self.notes: list[str] = []
        self.failed = 0

    def measure(self, cmd, prep=None, runs_cap: int | None = None) -> dict:
        """`cmd` is a list, or a callable(run index) -> list; `prep(run index)` runs untimed."""
        runs = []
        n_runs = min(self.args.runs, runs_cap) if runs_cap else self.args.runs
        for i in range(self.args.warmup + n_runs):
            if prep:
                prep(i)
            sync()
            r = run_once(cmd(i) if callable(cmd) else cmd, self.tmp)
            if i >= self.args.warmup:
                runs.append(r)
        return self.summarize(runs)

    @staticmethod
    def summarize(runs: list[dict]) -> dict:
        """Median / min / max wall, median CPU, peak RSS and median phases of `runs`."""
        walls = [r["wall"] for r in runs]
        phases = {}
        for name, a, b in (("start+read", None, "read_model"), ("model parse", "read_model", "read_recipe"),
                           ("recipe+checks", "read_recipe", "parsed"), ("plan", "parsed", "planned"),
                           ("output", "planned", "end")):
            vals = [r["marks"][b] - (r["marks"][a] if a else 0.0) for r in runs
                    if b in r["marks"] and (a is None or a in r["marks"])]
            if len(vals) == len(runs):
                phases[name] = statistics.median(vals)
        return {"median": statistics.median(walls), "min": min(walls), "max": max(walls),
                "cpu": statistics.median(r["cpu"] for r in runs),
                "rss_mb": max(r["rss_kb"] for r in runs) / 1024.0, "phases": phases,
                "n": len(runs)}

    def measure_pair(self, cmd_a: list[str], cmd_b: list[str]) -> tuple[dict, dict, float]:
        """A and B interleaved (A B, then B A, ...): both results and the median of the
        per-pair ratios time(B) / time(A)."""
        runs_a, runs_b, ratios = [], [], []
        for i in range(self.args.warmup + self.args.runs):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            pair = [None, None]
            for k in order:
                sync()
                pair[k] = run_once(cmd_a if k == 0 else cmd_b, self.tmp)
            if i >= self.args.warmup:
                runs_a.append(pair[0])
                runs_b.append(pair[1])
                ratios.append(pair[1]["wall"] / pair[0]["wall"])
        return self.summarize(runs_a), self.summarize(runs_b), statistics.median(ratios)

    def add_pair(self, group: str, name: str, cmd_a: list[str], cmd_b: list[str], *,
                 target: str = "", check=None, extra=None) -> None:
        """Rows `group`-base (cmd_a, the --baseline binary) and `group` (cmd_b), measured
        interleaved; the second row's extra gives the median pair ratio."""
        if not self.args.want(group):
            return
        print(f"[bench] {group} {name}: {' '.join(cmd_b)} (interleaved with {cmd_a[0]})",
              file=sys.stderr, flush=True)
        try:
            res_a, res_b, ratio = self.measure_pair(cmd_a, cmd_b)
        except (RunError, OSError) as e:
            self.failed += 1
            print(f"[bench] FAILED: {e}", file=sys.stderr, flush=True)
            self.rows.append({"group": group, "name": name, "error": str(e).splitlines()[0],
                              "target": target})
            return
        for g, res, label in ((f"{group}-base", res_a, f"{name} [baseline {cmd_a[0]}]"),
                              (group, res_b, name)):
            row = {"group": g, "name": label, "res": res, "target": target if g == group else "",
                   "extra": extra(res) if extra else "", "status": ""}
            if g == group:
                row["extra"] += f"; {ratio:.2f}× the baseline's time (median of pair ratios)"
                if target and check is not None:
                    row["status"] = "meets" if check(res) else "**misses**"
            self.rows.append(row)
            print(f"[bench]   {g}: median {res['median']:.3f} s {row['extra']}", file=sys.stderr,
                  flush=True)

    def interleaved(self, group: str, name: str, cmd_a, cmd_b, *, prep_a=None, prep_b=None,
                    target_ratio: float | None = None, target: str = "") -> dict | None:
        """A B A B ...: `warmup` untimed pairs, then `runs` timed pairs; the row reports A's
        times and the median of the per-pair ratios A/B (wall and CPU), so machine-load drift
        between pairs cancels. `cmd_*` / `prep_*` take the pair index like `add`'s."""
        if not self.args.want(group):
            return None
        print(f"[bench] {group} {name} (interleaved pairs)", file=sys.stderr, flush=True)
        pairs = []
        try:
            for i in range(self.args.warmup + self.args.runs):
                pair = []
                for cmd, prep in ((cmd_a, prep_a), (cmd_b, prep_b)):
                    if prep:
                        prep(i)
                    sync()
                    pair.append(run_once(cmd(i), self.tmp))
                if i >= self.args.warmup:
                    pairs.append(pair)
        except (RunError, OSError) as e:
            self.failed += 1
            print(f"[bench] FAILED: {e}", file=sys.stderr, flush=True)
            self.rows.append({"group": group, "name": name, "error": str(e).splitlines()[0],
                              "target": target})
            return None
        walls = [a["wall"] for a, _ in pairs]
        ratio = statistics.median(a["wall"] / b["wall"] for a, b in pairs)
        cpu_ratio = statistics.median(a["cpu"] / max(b["cpu"], 1e-6) for a, b in pairs)
        res = {"median": statistics.median(walls), "min": min(walls), "max": max(walls),
               "cpu": statistics.median(a["cpu"] for a, _ in pairs),
               "rss_mb": max(a["rss_kb"] for a, _ in pairs) / 1024.0, "phases": {},
               "n": len(pairs), "ratio": ratio, "cpu_ratio": cpu_ratio,
               "b_median": statistics.median(b["wall"] for _, b in pairs),
               "b_cpu": statistics.median(b["cpu"] for _, b in pairs)}
        row = {"group": group, "name": name, "res": res, "target": target,
               "extra": (f"**{ratio:.2f}×** the copy (median of {len(pairs)} pair ratios; copy "
                         f"median {res['b_median']:.3f} s); CPU {cpu_ratio:.2f}× the copy's "
                         f"({res['b_cpu']:.3f} s)")}
        if target_ratio is not None and not self.args.quick_shrunk(group):
            row["status"] = "meets" if ratio <= target_ratio else "**misses**"
        else:
            row["status"] = "n/a (quick)" if target else ""
        self.rows.append(row)
        print(f"[bench]   {row['extra']}", file=sys.stderr, flush=True)
        return res

    def add(self, group: str, name: str, cmd, *, prep=None, target: str = "",
            check=None, extra=None, runs_cap: int | None = None) -> dict | None:
        """Runs one benchmark and records a table row; `check(res) -> bool` judges the target."""
        if not self.args.want(group):
            return None
        shown = " ".join("<script>" if "\n" in a else a for a in (cmd(0) if callable(cmd) else cmd))
        print(f"[bench] {group} {name}: {shown}", file=sys.stderr, flush=True)
        try:
            res = self.measure(cmd, prep, runs_cap)
        except (RunError, OSError) as e:
            self.failed += 1
            print(f"[bench] FAILED: {e}", file=sys.stderr, flush=True)
            self.rows.append({"group": group, "name": name, "error": str(e).splitlines()[0],
                              "target": target})
            return None
        row = {"group": group, "name": name, "res": res, "target": target, "extra": ""}
        if extra:
            row["extra"] = extra(res)
        if target and check is not None and not self.args.quick_shrunk(group):
            row["status"] = "meets" if check(res) else "**misses**"
        elif target:
            row["status"] = "n/a (quick)" if self.args.quick_shrunk(group) else ""
        else:
            row["status"] = ""
        self.rows.append(row)
        print(f"[bench]   median {res['median']:.3f} s, peak RSS {res['rss_mb']:.1f} MB "
              f"{row['extra']}", file=sys.stderr, flush=True)
        return res


# --------------------------------------------------------------------------- report


def fmt_s(x: float) -> str:
    return f"{x:.3f}"


def render(bench: Bench, header: list[str]) -> str:
    out = ["# shardc benchmark results", ""] + [f"* {h}" for h in header] + [""]
    out += ["| # | benchmark | median s | min–max s | CPU s | peak RSS MB | throughput / ratio | target | status |",
            "|---|---|---:|---:|---:|---:|---|---|---|"]
    for row in bench.rows:
        if "error" in row:
            out.append(f"| {row['group']} | {row['name']} | FAILED | | | | {row['error']} | "
                       f"{row['target']} | **FAILED** |")
            continue
        r = row["res"]
        out.append(f"| {row['group']} | {row['name']} | {fmt_s(r['median'])} | "
                   f"{fmt_s(r['min'])}–{fmt_s(r['max'])} | {fmt_s(r['cpu'])} | {r['rss_mb']:.1f} | "
                   f"{row['extra']} | "
                   f"{row['target']} | {row['status']} |")
    out += ["", "CPU s = median user + system time of the process (all threads); on a loaded "
            "machine it is steadier than wall time.", "",
            "Phases (median s, from time-stamped `-vv` log lines; start+read = process start to "
            "model file read):", "",
            "| # | benchmark | start+read | model parse | recipe+checks | plan | output |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for row in bench.rows:
        if "error" in row or not row["res"]["phases"]:
            continue
        ph = row["res"]["phases"]
        cells = [fmt_s(ph[k]) if k in ph else "" for k in
                 ("start+read", "model parse", "recipe+checks", "plan", "output")]
        out.append(f"| {row['group']} | {row['name']} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def machine_header(args: argparse.Namespace) -> list[str]:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        version = subprocess.run([args.shardc, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        version = "?"
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=30).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        rev = "?"
    nproc = os.cpu_count() or 0
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    rss_src = "`/usr/bin/time -v`" if os.access(GNU_TIME, os.X_OK) else "wait4() rusage (GNU time missing)"
    return [f"date: {_dt.datetime.now().isoformat(timespec='seconds')}",
            f"machine: {platform.node()}, `nproc` = {nproc}, {cpu}",
            f"shardc: `{args.shardc}` ({version}), source `{rev}`",
            f"mode: {'quick (smoke: shrunk, targets n/a where shrunk)' if args.quick else 'full'}; "
            f"{args.runs} timed runs after {args.warmup} warm-up; median, min–max wall time; "
            f"peak RSS = max over runs via {rss_src}",
            f"temp dir: `{args.tmp or tempfile.gettempdir()}` (outputs and the cat baseline on the same filesystem)",
            f"load average (1/5/15 min) at start: {args.load_start}, at end: {load_average()}"
            " (anything above 0 on top of the bench competes for the cores)"]


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


# --------------------------------------------------------------------------- benchmarks


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def run_all(args: argparse.Namespace, tmp: Path) -> Bench:
    S = args.shardc
    b = Bench(args, tmp)

    # Inputs.
    ds_json = tmp / "DeepSeek-V3.params.json"
    with gzip.open(DATA_MODELS / "DeepSeek-V3.params.json.gz", "rb") as src, open(ds_json, "wb") as dst:
        shutil.copyfileobj(src, dst)
    inv = json.loads(ds_json.read_text())
    ds_yaml = tmp / "DeepSeek-V3.flat.model.yaml"
    ds_yaml.write_text(flat_yaml_model(inv))
    trivial = tmp / "trivial.recipe.yaml"
    trivial.write_text(TRIVIAL_RECIPE)
    ds16k = write_recipe(tmp, DS_RECIPE, ds_sizes(16384), 16384)
    out = tmp / "out"
    if args.only_parse:
        run_parse_group(b, S, ds_json, ds_yaml, trivial)
        return b

    def secs_target(limit_s: float, limit_mb: float | None = None):
        def check(res):
            return res["median"] <= limit_s and (limit_mb is None or res["rss_mb"] <= limit_mb)
        return check

    # A: DeepSeek-V3 on 16,384 ranks.
    b.add("A1", "validate DeepSeek-V3 JSON, 16,384 ranks", [S, "-vv", "validate", str(ds_json), str(ds16k)],
          target="≤ 1 s, ≤ 500 MB", check=secs_target(1.0, 500))
    b.add("A2", "compile --no-rank-files DeepSeek-V3 JSON, 16,384 ranks",
          [S, "-vv", "compile", str(ds_json), str(ds16k), "-o", str(out / "ds16k"), "--no-rank-files",
           "--force"],
          extra=lambda r: f"plan.json {(out / 'ds16k' / 'plan.json').stat().st_size / 1e6:.1f} MB")

    # F: rank-file size, DeepSeek-V3 on 16,384 ranks with both buffer layouts (a sample of
    # 64 ranks spread over every pipeline stage; the bytes do not depend on the machine).
    sample = "0-16128:256" if not args.quick else "0-12288:4096"
    fres = b.add("F", f"compile --ranks {sample} DeepSeek-V3 JSON, 16,384 ranks (rank-file size)",
                 [S, "compile", str(ds_json), str(ds16k), "-o", str(out / "ds16k-ranks"), "--ranks",
                  sample, "--force", "-q"])
    if fres is not None:
        sizes = sorted(f.stat().st_size for f in (out / "ds16k-ranks" / "ranks").glob("rank-*.json"))
        med = statistics.median(sizes)
        b.rows[-1]["extra"] = (f"rank file median {med / 1000:.1f} KB (min {sizes[0] / 1000:.1f}, "
                               f"max {sizes[-1] / 1000:.1f}) over {len(sizes)} files")
        b.rows[-1]["target"] = "≤ 30 KB median"
        b.rows[-1]["status"] = "meets" if med <= 30_000 else "**misses**"
    # A3/A4: the per-rank memory report (src/memory), per shard class like validate.
    b.add("A3", "memory DeepSeek-V3 JSON, 16,384 ranks (table)",
          [S, "-vv", "memory", str(ds_json), str(ds16k)], target="≈ A1 (validate)")
    b.add("A4", "validate --budget 80GiB DeepSeek-V3 JSON, 16,384 ranks",
          [S, "-vv", "validate", str(ds_json), str(ds16k), "--budget", "80GiB"],
          target="≈ A1 (validate)")

    # A5: with the training shape (issue 26): activations per stage and the step's peak.
    ds16k_act = tmp / "deepseek-v3-w16384-activations.recipe.yaml"
    ds16k_act.write_text(re.sub(
        r"^training:.*$", "training:\n  seq_len: 4096\n  micro_batch_size: 1\n"
        "  global_batch_size: 15360\n  recompute: selective\n  sequence_parallel: true\n"
        "  pipeline_schedule: {kind: 1f1b}", ds16k.read_text(), count=1, flags=re.M))
    b.add("A5", "memory DeepSeek-V3 JSON, 16,384 ranks, seq 4096 (activations counted)",
          [S, "-vv", "memory", str(ds_json), str(ds16k_act)], target="≈ A3, well under 1 s",
          check=secs_target(1.0))
    # A6: communication per step per rank (src/comm, issue 26 item 5), same plan and shape.
    b.add("A6", "cost DeepSeek-V3 JSON, 16,384 ranks, seq 4096 (communication, JSON)",
          [S, "-vv", "cost", str(ds_json), str(ds16k_act), "--format", "json"],
          target="≈ A5, well under 1 s", check=secs_target(1.0))

    # B: Llama-3.1-405B on 16,384 ranks (shipped plan).
    b.add("B1", "validate Llama-3.1-405B (shipped plan), 16,384 ranks",
          [S, "-vv", "validate", str(LLAMA_MODEL), str(LLAMA_RECIPE)],
          target="≤ 1 s, ≤ 500 MB", check=secs_target(1.0, 500))
    b.add("B2", "compile --no-rank-files Llama-3.1-405B, 16,384 ranks",
          [S, "-vv", "compile", str(LLAMA_MODEL), str(LLAMA_RECIPE), "-o", str(out / "l16k"),
           "--no-rank-files", "--force"],
          extra=lambda r: f"plan.json {(out / 'l16k' / 'plan.json').stat().st_size / 1e6:.1f} MB")

    # S: `shardc search` (issue 22): every layout enumerated and costed, the best planned
    # exactly (docs/search.md). DeepSeek-V3 plans its 45,395 tensors per exact check.
    b.add("S1", "search Llama-3.1-405B, 16,384 ranks, seq 8192",
          [S, "search", str(LLAMA_MODEL), "--world", "16384", "--hardware", "h100", "--seq-len",
           "8192", "--global-batch-tokens", str(16 * 1024 * 1024), "--budget", "80GB"],
          target="≤ 2 s", check=secs_target(2.0))
    if not args.quick:
        b.add("S2", "search DeepSeek-V3, 2,048 ranks, seq 4096",
              [S, "search", str(PLANS / "deepseek-v3.model.yaml"), "--world", "2048", "--hardware",
               "h800", "--seq-len", "4096", "--global-batch-tokens", str(4096 * 15360), "--budget",
               "80GB"], target="≤ 2 s", check=secs_target(2.0))

    # R: reshard DeepSeek-V3 from 2,048 (shipped plan) to 16,384 ranks, per shard class.
    if args.quick:  # smoke: the in-memory form only, to 4,096 ranks
        ds4k = write_recipe(tmp, DS_RECIPE, ds_sizes(4096), 4096)
        b.add("R3", "reshard DeepSeek-V3 2,048 -> 4,096 ranks (MODEL RECIPE pairs, summary)",
              [S, "reshard", str(ds_json), str(DS_RECIPE), str(ds_json), str(ds4k)])
    elif args.want("R"):
        run_reshard_group(b, S, ds_json, ds16k, out)

    # C: every rank file vs writing the same bytes. Every run writes into a new directory
    # and the group's outputs are deleted only at its end: on ext4 without a journal (as on
    # the reference VM) creating inodes right after deleting thousands of files is several
    # times slower (the kernel's recently_deleted() scan), which would measure the previous
    # run's `rm -rf`, not shardc. With too little free space, runs delete as they go.
    dp = 8 if args.quick else 256
    world = dp * 8
    lrec = write_recipe(tmp, LLAMA_RECIPE, {"dp": dp}, world)
    cdir = tmp / "rankfiles"
    cdir.mkdir()
    deleted_early = [0]

    def out_dir(tag: str, i: int) -> Path:
        return cdir / f"{tag}-{i}"

    def prep_for(tag: str):
        def prep(i: int):
            # `cat` makes one file: deleting the last one costs nothing. Multi-file outputs
            # are kept unless the disk gets short (< 3 outputs + 8 GB free).
            olds = [d for d in cdir.glob(f"{tag}-*")]
            last = max((dir_bytes(d) for d in olds), default=0)
            if tag == "cat" or shutil.disk_usage(cdir).free < 3 * last + 8e9:
                deleted_early[0] += tag != "cat" and bool(olds)
                for old in olds:
                    shutil.rmtree(old, ignore_errors=True)
            if not tag.startswith("shardc"):
                out_dir(tag, i).mkdir()
        return prep

    def compile_cmd(tag: str, extra_args: list[str]):
        return lambda i: [S, "-vv", "compile", str(LLAMA_MODEL), str(lrec), "-o",
                          str(out_dir(tag, i))] + extra_args

    label = f"Llama-3.1-405B, {world:,} ranks (dp {dp} x tp 8)"
    cfull = b.add("C1", f"compile, every rank file, {label}", compile_cmd("shardc", []),
                  prep=prep_for("shardc"))
    if cfull is not None:
        rdir = next(d for d in sorted(cdir.glob("shardc-*")) if (d / "plan.json").exists())
        nbytes = dir_bytes(rdir) - (rdir / ".shardc-output").stat().st_size
        nfiles = len(list((rdir / "ranks").glob("rank-*.json"))) + 1
        cfull_row = b.rows[-1]
        cfull_row["extra"] = (f"{nbytes / 1e6:.0f} MB in {nfiles} files, "
                              f"{nbytes / 1e6 / cfull['median']:.0f} MB/s")
        if not args.quick and args.jobs1:
            b.add("C2", f"compile, every rank file, -j 1, {label}", compile_cmd("shardc-j1", ["-j", "1"]),
                  prep=prep_for("shardc-j1"), runs_cap=3,
                  extra=lambda r: f"{nbytes / 1e6 / r['median']:.0f} MB/s (max 3 runs)")
        cat = b.add("C3", "baseline: `cat plan.json ranks/* > fresh/all` (same bytes, one stream)",
                    lambda i: ["sh", "-c", 'cd "$0" && exec cat plan.json ranks/* > "$1/all"', str(rdir),
                               str(out_dir("cat", i))],
                    prep=prep_for("cat"), extra=lambda r: f"{nbytes / 1e6 / r['median']:.0f} MB/s")
        if cat is not None:
            ratio = cfull["median"] / cat["median"]
            cpu_ratio = cfull["cpu"] / max(cat["cpu"], 1e-6)
            cfull_row["extra"] += f"; **{ratio:.2f}× cat** (CPU time {cpu_ratio:.1f}× cat's)"
            cfull_row["target"] = "≤ 2× cat"
            cfull_row["status"] = "n/a (quick)" if args.quick else ("meets" if ratio <= 2.0 else "**misses**")
        # Per-file copy, in-process (no fork per file): includes creating the files.
        copy = b.add("C4", f"baseline: per-file copy of the {nfiles} files (open/write/close, in-process)",
                     lambda i: [sys.executable, "-c", PER_FILE_COPY, str(rdir), str(out_dir("copy", i))],
                     prep=prep_for("copy"), runs_cap=3,
                     extra=lambda r: f"{nbytes / 1e6 / r['median']:.0f} MB/s (max 3 runs)")
        if copy is not None:
            b.rows[-1]["extra"] += f"; shardc = {cfull['median'] / copy['median']:.2f}× this"
        # The target's measurement: shardc and the per-file copy of its own output, A B A B.
        b.interleaved("C5", f"every rank file vs per-file copy of the same bytes, interleaved, {label}",
                      compile_cmd("shardc-ab", []),
                      lambda i: [sys.executable, "-c", PER_FILE_COPY, str(rdir), str(out_dir("copy-ab", i))],
                      prep_a=prep_for("shardc-ab"), prep_b=prep_for("copy-ab"),
                      target_ratio=1.5, target="≤ 1.5× per-file copy")
    shutil.rmtree(cdir, ignore_errors=True)
    b.notes.append("C: every run writes a new directory, deleted at the end of the group"
                   + (f" (disk short: {deleted_early[0]} runs deleted the previous output first, "
                      "slower on ext4 without a journal)" if deleted_early[0] else ""))

    run_parse_group(b, S, ds_json, ds_yaml, trivial)

    # E: scaling.
    # --quick (CTest bench/smoke, on the test build whose invariant checker walks every
    # rank after each plan) stops at 16,384 ranks: 262,144 took 43 s there.
    worlds = [1024, 4096, 16384] if args.quick else [1024, 4096, 16384, 65536, 262144]
    base = None
    for w in worlds:
        rec = write_recipe(tmp, DS_RECIPE, ds_sizes(w), w)
        sz = ds_sizes(w)
        target, check = "", None
        if w == 262144:
            target, check = "≤ 2 s", secs_target(2.0)
        elif w == 16384:
            target, check = "≤ 1 s, ≤ 500 MB", secs_target(1.0, 500)
        res = b.add("E", f"validate DeepSeek-V3 JSON, {w:,} ranks (dp_shard {sz['dp_shard']}, "
                         f"efsdp {sz['efsdp']})",
                    [S, "-vv", "validate", str(ds_json), str(rec)], target=target, check=check,
                    extra=(lambda r: f"{r['median'] / base:.2f}× the 1k time") if base else None)
        if res is not None and base is None:
            base = res["median"]
            b.rows[-1]["extra"] = "1.00× (reference)"
    # F: checkpoint import (headers only; the data parts are sparse holes).
    if not args.want("F"):
        return b
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    import checkpoint_util as cu  # noqa: E402
    ds_cfg = cu.load_config("DeepSeek-V3")
    fp8_dir, bf16_dir = tmp / "ckpt-ds-fp8", tmp / "ckpt-ds-bf16"
    n_fp8 = len(cu.write_checkpoint(inv, ds_cfg, fp8_dir, fp8=True, num_files=163))
    n_bf16 = len(cu.write_checkpoint(inv, ds_cfg, bf16_dir))
    for group, label, d, n in (("F1", "FP8", fp8_dir, n_fp8), ("F2", "bf16", bf16_dir, n_bf16)):
        files = len(list(d.glob("*.safetensors")))
        hdr_mb = sum(min(p.stat().st_size, 8 + int.from_bytes(p.open("rb").read(8), "little"))
                     for p in d.glob("*.safetensors")) / 1e6
        b.add(group, f"import DeepSeek-V3 checkpoint ({label}: {files} files, {n:,} tensors)",
              [S, "import", str(d), "-o", str(tmp / f"import-{label}.yaml")],
              target="≤ 0.5 s" if group == "F1" else "", check=secs_target(0.5) if group == "F1" else None,
              extra=lambda r, hdr_mb=hdr_mb: f"{hdr_mb:.1f} MB of headers")
    return b


def run_parse_group(b: Bench, S: str, ds_json: Path, ds_yaml: Path, trivial: Path) -> None:
    """D: `validate` of the JSON inventory and of the flat YAML model with a trivial recipe.
    With --baseline, each row also runs the baseline binary interleaved (A B, B A, ...) and
    reports the median of the per-pair time ratios, so that load drift cancels."""
    for group, label, path in (("D1", "JSON inventory", ds_json), ("D2", "flat YAML model", ds_yaml)):
        size_mb = path.stat().st_size / 1e6

        def extra(r, size_mb=size_mb):
            s = f"{size_mb:.2f} MB: {size_mb / r['median']:.1f} MB/s whole command"
            if "model parse" in r["phases"]:
                s += f", {size_mb / r['phases']['model parse']:.1f} MB/s model-parse phase"
            return s

        is_json = group == "D1"
        name = f"parse: validate {label} DeepSeek-V3 ({size_mb:.1f} MB), trivial 1-rank recipe"
        target = "≥ 200 MB/s" if is_json else ""
        check = (lambda r, size_mb=size_mb: size_mb / r["median"] >= 200) if is_json else None
        args = ["-vv", "validate", str(path), str(trivial)]
        if not b.args.baseline:
            b.add(group, name, [S] + args, extra=extra, target=target, check=check)
            continue
        b.add_pair(group, name, [b.args.baseline] + args, [S] + args, extra=extra,
                   target=target, check=check)


def run_reshard_group(b: Bench, S: str, ds_json: Path, ds16k: Path, out: Path) -> None:
    """R: `shardc reshard` DeepSeek-V3 2,048 -> 16,384 ranks (and back), from plan.json files
    compiled untimed first, and from the MODEL RECIPE pairs (planning in memory)."""
    plans = {}
    for tag, recipe in (("ds2k", DS_RECIPE), ("ds16k", ds16k)):
        plans[tag] = out / f"reshard-{tag}"
        proc = subprocess.run([S, "-q", "compile", str(ds_json), str(recipe), "-o", str(plans[tag]),
                               "--no-rank-files", "--force"], capture_output=True, text=True)
        if proc.returncode != 0:
            b.failed += 1
            b.rows.append({"group": "R", "name": f"compile {tag} for reshard",
                           "error": (proc.stderr.strip().splitlines() or ["failed"])[-1],
                           "target": ""})
            return
    mb = {t: (p / "plan.json").stat().st_size / 1e6 for t, p in plans.items()}
    listing = out / "reshard-listing.json"

    def pieces(res) -> str:
        return f"plan.json {mb['ds2k']:.1f} + {mb['ds16k']:.1f} MB"

    b.add("R1", "reshard DeepSeek-V3 2,048 -> 16,384 ranks (plan.json inputs, summary)",
          [S, "reshard", str(plans["ds2k"]), str(plans["ds16k"]), "--ranks-per-node", "8"],
          target="≤ 10 s", check=lambda r: r["median"] <= 10.0, extra=pieces)
    b.add("R2", "reshard DeepSeek-V3 16,384 -> 2,048 ranks (plan.json inputs, summary)",
          [S, "reshard", str(plans["ds16k"]), str(plans["ds2k"]), "--ranks-per-node", "8"],
          extra=pieces)
    b.add("R3", "reshard DeepSeek-V3 2,048 -> 16,384 ranks (MODEL RECIPE pairs, summary)",
          [S, "reshard", str(ds_json), str(DS_RECIPE), str(ds_json), str(ds16k)])
    b.add("R4", "reshard DeepSeek-V3 2,048 -> 16,384 ranks, JSON listing of 1,024 ranks (a stage)",
          [S, "reshard", str(plans["ds2k"]), str(plans["ds16k"]), "--ranks", "0-1023", "-o",
           str(listing)],
          extra=lambda r: f"listing {listing.stat().st_size / 1e6:.1f} MB")


PER_FILE_COPY = r"""
import os, sys
src, dst = sys.argv[1], sys.argv[2]
def copy(rel):
    with open(os.path.join(src, rel), 'rb') as f:
        data = f.read()
    with open(os.path.join(dst, rel), 'wb') as f:
        f.write(data)
os.makedirs(os.path.join(dst, 'ranks'), exist_ok=True)
copy('plan.json')
for name in sorted(os.listdir(os.path.join(src, 'ranks'))):
    copy('ranks/' + name)
"""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shardc", required=True, help="shardc binary")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 run, no warm-up, shrunk")
    ap.add_argument("--runs", type=int, help="timed runs per benchmark (default 5; quick 1)")
    ap.add_argument("--warmup", type=int, help="untimed runs first (default 1; quick 0)")
    ap.add_argument("--no-jobs1", dest="jobs1", action="store_false",
                    help="skip the -j 1 rank-file run")
    ap.add_argument("--output", default=str(REPO / "bench-results.md"), help="Markdown table file")
    ap.add_argument("--tmp", help="directory for inputs and outputs (default: system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--baseline", help="another shardc binary (e.g. main's): group D runs it "
                    "interleaved with --shardc and reports the median pair ratio")
    ap.add_argument("--only-parse", action="store_true", help="run group D (parsing) only")
    ap.add_argument("--only", help="run only these groups (comma-separated letters, e.g. C)")
    args = ap.parse_args(argv)
    if args.runs is None:
        args.runs = 1 if args.quick else 5
    if args.warmup is None:
        args.warmup = 0 if args.quick else 1
    if args.runs < 1 or args.warmup < 0:
        ap.error("--runs must be >= 1 and --warmup >= 0")
    args.quick_shrunk = lambda group: args.quick and group.startswith("C")
    only = {g.strip().upper() for g in (args.only or "").split(",") if g.strip()}
    args.want = lambda group: not only or group[:1] in only
    if not os.access(args.shardc, os.X_OK):
        print(f"bench: shardc binary {args.shardc} not found or not executable", file=sys.stderr)
        return 2
    args.shardc = str(Path(args.shardc).resolve())
    if args.baseline:
        if not os.access(args.baseline, os.X_OK):
            print(f"bench: baseline binary {args.baseline} not found or not executable",
                  file=sys.stderr)
            return 2
        args.baseline = str(Path(args.baseline).resolve())
    args.load_start = load_average()
    tmp = Path(tempfile.mkdtemp(prefix="shardc-bench-", dir=args.tmp))
    t0 = time.perf_counter()
    try:
        bench = run_all(args, tmp)
    finally:
        if args.keep:
            print(f"[bench] kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    header = machine_header(args) + bench.notes + [f"bench wall time: {time.perf_counter() - t0:.0f} s"]
    table = render(bench, header)
    print(table)
    Path(args.output).write_text(table)
    if bench.failed:
        print(f"tools/bench: {bench.failed} benchmark(s) FAILED; table written to {args.output}",
              file=sys.stderr)
        return 1
    print(f"tools/bench: ok ({len(bench.rows)} benchmarks); table written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
