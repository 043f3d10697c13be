"""Shared plumbing of the runtime tests: a Python with torch, compiling plans,
random safetensors checkpoints, and launching bounded worker processes.

Workers are processes forked from a fork server that imported torch and the
adapter once (`worker.entry`; or `python worker.py` for another interpreter), one
per rank, joined by gloo on 127.0.0.1 at a port chosen free at run time. Every launch is bounded: a worker
that fails makes the launcher kill the others at once, and after `timeout`
seconds all of them are killed (process groups, SIGKILL) and the launch fails.
No worker outlives `launch`.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ADAPTER = os.path.join(REPO, "tools", "python")
sys.path.insert(0, ADAPTER)

import numpy as np  # noqa: E402

from shardc_runtime import dtypes, safetensors_io  # noqa: E402


def compile_plan(shardc, model, recipe, outdir):
    """`shardc compile MODEL RECIPE -o OUTDIR --force --quiet`; raises on failure."""
    r = subprocess.run([shardc, "compile", model, recipe, "-o", outdir, "--force", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"shardc compile {recipe} failed ({r.returncode}):\n{r.stderr}")
    return outdir


# Shipped models shrunk to test size: every extent mapped (heads and their
# divisibility kept, uneven vocab kept uneven), layers cut to 2.
SHRINK = {
    "qwen2.5-0.5b": {151936: 151, 896: 28, 128: 4, 4864: 38},
    "gpt2": {50257: 101, 768: 12, 2304: 36, 3072: 48, 1024: 16},
    "gemma-2-2b": {256000: 257, 2304: 18, 2048: 16, 1024: 8, 9216: 38},
}


def shrink_model(src, dims, dst, layers=2):
    """Rewrite a shipped model YAML with every shape extent mapped by `dims`
    and every `repeat` range cut to `layers`; an unmapped extent is an error."""
    text = open(src).read()

    def shape(m):
        vals = [int(v) for v in m.group(1).split(",") if v.strip()]
        missing = [v for v in vals if v not in dims]
        if missing:
            raise ValueError(f"{src}: no shrink mapping for extents {missing}")
        return "shape: [" + ", ".join(str(dims[v]) for v in vals) + "]"

    text = re.sub(r"shape: \[([0-9, ]*)\]", shape, text)
    text = re.sub(r"repeat: \{(\w+): \[0, \d+\]\}", lambda m: f"repeat: {{{m.group(1)}: [0, {layers}]}}",
                  text)
    with open(dst, "w") as f:
        f.write(text)
    return dst


def random_values(dtype, shape, rng):
    """Random finite values of `dtype` as a storage-dtype array (bit patterns)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if dtype in ("float32", "float64", "float16"):
        a = rng.standard_normal(n).astype(dtypes.storage_dtype(dtype))
    elif dtype == "bfloat16":
        a = (rng.standard_normal(n).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        a = a.view(np.int16)
    elif dtype == "bool":
        a = rng.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dtypes.storage_dtype(dtype))
        a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtypes.storage_dtype(dtype))
    return a.reshape(shape)


def write_checkpoint(outdir, path, seed=0, hf_style=True):
    """Random-valued safetensors checkpoint of every param of a compiled plan.

    hf_style: tied aliases are left out (stored once, as Hugging Face does)
    and stacked experts are written per expert under their source names, so
    the adapter must resolve both. Returns {tensor name: array}.
    """
    plan = json.load(open(os.path.join(outdir, "plan.json")))
    rng = np.random.default_rng(seed)
    tensors = {}
    for p in plan["params"]:
        if hf_style and p.get("alias_of"):
            continue
        sf = p.get("stacked_from")
        if hf_style and sf:
            for src in sf["sources"]:
                tensors[src] = (random_values(p["dtype"], p["global_shape"][1:], rng), p["dtype"])
        else:
            tensors[p["name"]] = (random_values(p["dtype"], p["global_shape"], rng), p["dtype"])
    safetensors_io.write_file(path, tensors, {"format": "pt"})
    return {k: v[0] for k, v in tensors.items()}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill(procs):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


# Modules a task kind needs beyond worker.py's own imports (preloaded with it).
_TASK_MODULES = {"fsdp": "fsdp_check", "hf": "hf_forward", "train": "train", "misuse": "misuse"}
# The launch environment: set in this process before the fork server starts (once per
# test process), so the server and every worker forked from it see it.
_WORKER_ENV = {"PYTHONPATH": ADAPTER, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # nothing is downloaded
_SERVER = {"modules": None}


def _fork_server(modules):
    """The multiprocessing fork server of this test process, with torch, the adapter and
    `modules` imported once: a worker forked from it starts in milliseconds instead of
    importing torch again (seconds per rank, eight ranks on two cores). The server runs no
    torch op before forking, so no OpenMP pool or gloo state is inherited."""
    import multiprocessing
    ctx = multiprocessing.get_context("forkserver")
    if _SERVER["modules"] is None:
        os.environ.update(_WORKER_ENV)
        if HERE not in sys.path:
            sys.path.insert(0, HERE)
        ctx.set_forkserver_preload(sorted(modules))
        _SERVER["modules"] = set(modules)
    return ctx  # a module the server lacks is imported by the worker that needs it


def launch(python, world, spec, workdir, timeout=240):
    """Run `world` workers on `spec` (a JSON-able dict, see worker.py).

    Returns (ok, outputs): ok when every worker exited 0; outputs[r] is worker
    r's combined stdout+stderr. Kills every worker on the first failure or at
    the timeout; none survives this call. Workers are forked from this test
    process's fork server (worker.entry) when `python` is this interpreter, else
    started as `python worker.py` processes.
    """
    spec_path = os.path.join(workdir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    port = free_port()
    modules = {"worker"} | {_TASK_MODULES[t["kind"]] for t in spec.get("tasks", [])
                            if t.get("kind") in _TASK_MODULES}
    if python == sys.executable:
        return _launch_forked(_fork_server(modules), world, spec_path, port, workdir, timeout)
    return _launch_popen(python, world, spec_path, port, workdir, timeout)


def _launch_forked(ctx, world, spec_path, port, workdir, timeout):
    import worker  # the same module the fork server preloaded
    procs, paths, started = [], [], time.monotonic()
    try:
        for r in range(world):
            paths.append(os.path.join(workdir, f"worker-{r}.log"))
            argv = ["--rank", str(r), "--world", str(world), "--port", str(port),
                    "--spec", spec_path]
            proc = ctx.Process(target=worker.entry, args=(argv, paths[-1], timeout + 30),
                               name=f"rank-{r}")
            proc.start()
            procs.append(proc)
        deadline, ok, note = time.monotonic() + timeout, True, ""
        while any(p.is_alive() for p in procs):
            if any(p.exitcode not in (None, 0) for p in procs):
                ok = False
                break
            if time.monotonic() > deadline:
                ok, note = False, f"\nlauncher: timeout after {timeout} s, killing every worker\n"
                break
            time.sleep(0.05)
        ok = ok and all(p.exitcode == 0 for p in procs)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=10)
    outputs = []
    for r, (p, path) in enumerate(zip(procs, paths)):
        text = open(path, errors="replace").read() if os.path.exists(path) else ""
        text += note + (f"\nlauncher: rank {r} exit code {p.exitcode}, all exited after "
                        f"{time.monotonic() - started:.1f} s\n")
        outputs.append(text)
    return ok, outputs


def _launch_popen(python, world, spec_path, port, workdir, timeout):
    procs, logs, started = [], [], time.monotonic()
    env = dict(os.environ, **_WORKER_ENV, SHARDC_WORKER_TIMEOUT=str(timeout + 30))
    try:
        for r in range(world):
            log = open(os.path.join(workdir, f"worker-{r}.log"), "w+")
            logs.append(log)
            procs.append(subprocess.Popen(
                [python, os.path.join(HERE, "worker.py"), "--rank", str(r), "--world", str(world),
                 "--port", str(port), "--spec", spec_path],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        deadline, ok = time.monotonic() + timeout, True
        while any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs):
                ok = False
                break
            if time.monotonic() > deadline:
                ok = False
                for log in logs:
                    log.write(f"\nlauncher: timeout after {timeout} s, killing every worker\n")
                break
            time.sleep(0.05)
        ok = ok and all(p.returncode == 0 for p in procs)
    finally:
        _kill(procs)
    for r, (p, log) in enumerate(zip(procs, logs)):
        log.write(f"\nlauncher: rank {r} exit code {p.returncode}, all exited after "
                  f"{time.monotonic() - started:.1f} s\n")
    outputs = []
    for log in logs:
        log.flush()
        log.seek(0)
        outputs.append(log.read())
        log.close()
    return ok, outputs
