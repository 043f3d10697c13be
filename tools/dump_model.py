#!/usr/bin/python3
"""Dump a PyTorch module's parameters as a shardc model (the exact named_parameters() order).

Usage:
  dump_model.py SPEC [-o OUT.json|OUT.yaml] [--name NAME] [--shardc BIN]

SPEC names a callable that returns an nn.Module: `package.module:factory` or
`path/to/file.py:factory` (`factory` may also be a class). The module is built on the meta
device (no memory for weights): with torch >= 2.0 inside `with torch.device("meta")`; on
older torch (Debian's python3-torch 1.13) the factory gets `device="meta"` when it accepts
a `device` argument, else it is built on the CPU and moved to meta.

Output (contract §3): every parameter in registration order (modules depth-first, each
module's own parameters in registration order, as named_parameters() walks them) with its
FQN, shape, torch dtype and `requires_grad`; a parameter reachable under several names
(a tied weight, e.g. `lm_head.weight = embed_tokens.weight`, or tensors sharing storage)
is listed at each name, and the later names become `tied_weights: {alias: source}`.
`.json` (or stdout) gets the plain inventory; `.yaml` the compact model via `shardc import`.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def load_factory(spec: str):
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise SystemExit(f"dump_model.py: SPEC must be module:callable or file.py:callable, got {spec!r}")
    if target.endswith(".py") or os.path.sep in target:
        mod_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        if mod_spec is None or mod_spec.loader is None:
            raise SystemExit(f"dump_model.py: cannot load {target}")
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, attr)


def build_on_meta(factory):
    import torch
    if hasattr(torch.device("meta"), "__enter__"):  # torch >= 2.0
        with torch.device("meta"):
            return factory()
    try:
        accepts_device = "device" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        accepts_device = False
    if accepts_device:
        return factory(device="meta")
    return factory().to("meta")


def storage_key(p) -> tuple:
    """Identity of a parameter's storage: the object itself on meta (no storage there),
    else the data pointer with shape, stride and offset."""
    if p.device.type == "meta" or p.data_ptr() == 0:
        return ("id", id(p))
    return ("ptr", p.data_ptr(), tuple(p.shape), tuple(p.stride()), p.storage_offset())


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def inventory(model, name: str) -> dict:
    params, tied, first = [], {}, {}
    # named_modules(remove_duplicate=False) keeps shared submodules under every name, and
    # reading each module's own _parameters keeps tied parameters at every FQN, in the
    # same order named_parameters() would visit them (which drops the repeats).
    for mod_name, mod in model.named_modules(remove_duplicate=False):
        for pname, p in mod._parameters.items():
            if p is None:
                continue
            fqn = f"{mod_name}.{pname}" if mod_name else pname
            entry = {"name": fqn, "shape": list(p.shape), "dtype": dtype_name(p.dtype)}
            if not p.requires_grad:
                entry["requires_grad"] = False
            params.append(entry)
            key = storage_key(p)
            if key in first:
                tied[fqn] = first[key]
            else:
                first[key] = fqn
    counts: dict[str, int] = {}
    for p in params:
        counts[p["dtype"]] = counts.get(p["dtype"], 0) + 1
    return {"model": name, "dtype": max(counts, key=counts.get) if counts else "float32",
            "tied_weights": tied, "params": params}


def find_shardc(given: str | None) -> str:
    repo = Path(__file__).resolve().parent.parent
    for cand in (given, os.environ.get("SHARDC"), repo / "build/release/shardc",
                 repo / "build/test/shardc", shutil.which("shardc")):
        if cand and Path(cand).is_file():
            return str(cand)
    raise SystemExit("dump_model.py: YAML output needs the shardc binary (--shardc or $SHARDC)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("-o", "--output", help="OUT.json (plain inventory) or OUT.yaml (compact)")
    ap.add_argument("--name", help="model name (default: the module's class name)")
    ap.add_argument("--shardc", help="shardc binary for YAML output")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("dump_model.py: needs PyTorch (Debian: apt-get install python3-torch)")
    model = build_on_meta(load_factory(args.spec))
    inv = inventory(model, args.name or type(model).__name__)
    text = json.dumps(inv, indent=1) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    if out.suffix in (".yaml", ".yml"):
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / f"{inv['model']}.params.json"
            src.write_text(text)
            return subprocess.call([find_shardc(args.shardc), "import", str(src), "-o", str(out)])
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
