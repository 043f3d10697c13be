#!/usr/bin/python3
"""Dump a PyTorch module's parameters as a shardc model (the exact named_parameters() order).

Usage:
  dump_model.py SPEC [-o OUT.json|OUT.yaml] [--name NAME] [--shardc BIN]
  dump_model.py CHECKPOINT_DIR | config.json [-o ...]     (or --config config.json)

SPEC names a callable that returns an nn.Module: `package.module:factory` or
`path/to/file.py:factory` (`factory` may also be a class). A checkpoint directory, a
config.json or `--config PATH` builds the Hugging Face model instead
(`AutoModelForCausalLM.from_config`, transformers as pinned in tools/python/requirements.txt)
and writes its attributes too: the params go, with their module shapes and dtypes, through
`shardc import` as a sparse checkpoint beside the config (so attributes, sub-models,
`fused:` and `head_indexed:` are exactly what import writes for that config), then the
module's named_parameters() order is put back and the file says `module_order: module` —
the confirmation `validate` asks for after an import with W-MODULE-ORDER. The module is built on the meta
device (no memory for weights): with torch >= 2.0 inside `with torch.device("meta")`; on
older torch (Debian's python3-torch 1.13) the factory gets `device="meta"` when it accepts
a `device` argument, else it is built on the CPU and moved to meta.

Output (contract §3): every parameter in registration order (modules depth-first, each
module's own parameters in registration order, as named_parameters() walks them) with its
FQN, shape, torch dtype and `requires_grad`; a parameter reachable under several names
(a tied weight, e.g. `lm_head.weight = embed_tokens.weight`, or tensors sharing storage)
is listed at each name, and the later names become `tied_weights: {alias: source}`.
`.json` (or stdout) gets the plain inventory; `.yaml` the compact model via `shardc import`.

`sharded_layout(model)` (a library function, torch >= 2.6) dumps what one rank holds of a
model already parallelized by DTensor / FSDP2 (torchtitan's `parallelize_*`, tests/torch/
titan.py): per parameter its FQN, global and local shape, the placement on each named mesh
axis, DTensor's global offset (`compute_local_shape_and_global_offset`), the physical
offset (the TP/EP piece's offset plus the start of FSDP2's chunk of it) and FSDP2's padded
sharded shape.
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


def _placement_label(p) -> str:
    from torch.distributed.tensor.placement_types import Shard, _StridedShard
    if isinstance(p, _StridedShard):
        return f"_StridedShard({p.dim}, sf={p.split_factor})"
    if isinstance(p, Shard):
        return f"Shard({p.dim})"
    return repr(p) if not type(p).__name__ == "Replicate" else "Replicate()"


def _fsdp_params(model) -> dict[int, object]:
    """id(sharded nn.Parameter) -> its FSDP2 FSDPParam, over every fully_shard'ed module."""
    out: dict[int, object] = {}
    for mod in model.modules():
        get_state = getattr(mod, "_get_fsdp_state", None)
        if get_state is None:
            continue
        state = get_state()
        # one group per mesh when shard_placement_fn gives per-param meshes (torch >= 2.13)
        groups = getattr(state, "_fsdp_param_groups", None)
        if groups is None:
            groups = [state._fsdp_param_group] if state._fsdp_param_group is not None else []
        for group in groups:
            for fp in group.fsdp_params:
                out[id(fp.sharded_param)] = fp
    return out


def fsdp_units(model) -> list[dict]:
    """One rank's FSDP2 all-gather groups, in module order: the modules of each
    fully_shard call (FQNs; a list call such as torchtitan's [norm, lm_head] gives
    several), the group's mesh axis names and its members in all-gather order with each
    one's padded sharded numel and dtype. A module state with per-param meshes
    (shard_placement_fn returning a mesh, torch >= 2.13) gives one entry per group."""
    fqn_of = {id(mod): name for name, mod in model.named_modules()}
    seen, out = set(), []
    for mod in model.modules():
        get_state = getattr(mod, "_get_fsdp_state", None)
        if get_state is None or id(get_state()) in seen:
            continue
        state = get_state()
        seen.add(id(state))
        groups = getattr(state, "_fsdp_param_groups", None)
        if groups is None:
            groups = [state._fsdp_param_group] if state._fsdp_param_group is not None else []
        modules = [fqn_of.get(id(m), "?") for m in getattr(state, "_modules", (mod,))]
        for group in groups:
            members = []
            for fp in group.fsdp_params:
                owner = fqn_of.get(id(fp._module_info.module), "?")
                name = f"{owner}.{fp._module_info.param_name}" if owner else fp._module_info.param_name
                members.append({"name": name, "padded_numel": fp.padded_sharded_param_size.numel(),
                                "dtype": dtype_name(fp.sharded_param.dtype)})
            mesh = group.mesh_info.mesh
            out.append({"modules": modules, "mesh": list(mesh.mesh_dim_names or ()),
                        "members": members})
    return out


def sharded_layout(model) -> list[dict]:
    """One rank's parameters of a parallelized model (see the module docstring). Offsets
    of an empty piece are the global extent on its empty dim (DTensor/DCP convention)."""
    from torch.distributed.tensor import DTensor, Replicate
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    fsdp = _fsdp_params(model)
    out = []
    for fqn, p in model.named_parameters():
        gshape = list(p.shape)
        entry = {"name": fqn, "dtype": dtype_name(p.dtype), "global_shape": gshape}
        if not isinstance(p, DTensor):
            entry.update(local_shape=gshape, global_offset=[0] * len(gshape),
                         physical_offset=[0] * len(gshape), padded_shape=gshape, placements={})
            out.append(entry)
            continue
        mesh, places = p.device_mesh, list(p.placements)
        names = list(mesh.mesh_dim_names or [str(i) for i in range(mesh.ndim)])
        local, offset = compute_local_shape_and_global_offset(p.shape, mesh, places)
        entry["local_shape"] = list(p.to_local().shape)
        entry["global_offset"] = list(offset)
        if list(local) != entry["local_shape"]:
            entry["dtensor_local_shape"] = list(local)
        entry["placements"] = {n: _placement_label(q) for n, q in zip(names, places)
                               if not isinstance(q, Replicate)}
        fp = fsdp.get(id(p))
        physical = list(offset)
        entry["padded_shape"] = entry["local_shape"]
        if fp is not None:
            entry["padded_shape"] = list(fp.padded_sharded_param_size)
            dp_names = set(fp.mesh_info.mesh.mesh_dim_names or ())
            model_places = [Replicate() if n in dp_names or "_".join(sorted(dp_names)) == n
                            else q for n, q in zip(names, places)]
            # FSDP2 splits the TP/EP-local piece: torch.chunk over the FSDP shard ranks
            tp_local, tp_offset = compute_local_shape_and_global_offset(p.shape, mesh,
                                                                        model_places)
            dim = fp.fsdp_placement.dim
            world, rank = fp.mesh_info.shard_mesh_size, fp.mesh_info.shard_mesh_rank
            chunk = -(-tp_local[dim] // world)
            physical = list(tp_offset)
            physical[dim] += min(rank * chunk, tp_local[dim])
            entry["fsdp"] = {"dim": dim, "shard_size": world, "shard_rank": rank}
        entry["physical_offset"] = physical
        for key in ("global_offset", "physical_offset"):
            entry[key] = [gshape[d] if n == 0 else o
                          for d, (n, o) in enumerate(zip(entry["local_shape"], entry[key]))]
        out.append(entry)
    return out


_ST_CODES = {"float32": ("F32", 4), "float16": ("F16", 2), "bfloat16": ("BF16", 2),
             "float64": ("F64", 8), "float8_e4m3fn": ("F8_E4M3", 1), "float8_e5m2": ("F8_E5M2", 1),
             "int64": ("I64", 8), "int32": ("I32", 4), "int16": ("I16", 2), "int8": ("I8", 1),
             "uint8": ("U8", 1), "bool": ("BOOL", 1), "uint16": ("U16", 2), "uint32": ("U32", 4),
             "uint64": ("U64", 8), "float8_e8m0fnu": ("F8_E8M0", 1)}


def _write_sparse_safetensors(path: Path, params: list[dict]) -> None:
    """A safetensors file with real headers and a sparse (hole) data section."""
    import struct
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for p in params:
        code, size = _ST_CODES[p["dtype"]]
        n = size
        for e in p["shape"]:
            n *= e
        header[p["name"]] = {"dtype": code, "shape": p["shape"], "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        fh.truncate(8 + len(raw) + offset)


def hf_model_from_config(config: dict):
    """transformers' AutoModelForCausalLM.from_config on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    conf = AutoConfig.for_model(config["model_type"], **kwargs)
    dtype = getattr(torch, str(config.get("torch_dtype") or config.get("dtype") or "float32"))
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(conf, dtype=dtype)


def with_import_attributes(inv: dict, config: dict, shardc: str) -> dict:
    """`inv` (module order) with what `shardc import` derives from `config` for these
    params: attributes, tie_word_embeddings, submodels, per-param fused / head_indexed;
    `module_order: module` (the order is named_parameters()')."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "ckpt"
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        tied = set(inv["tied_weights"])
        _write_sparse_safetensors(d / "model.safetensors", [p for p in inv["params"] if p["name"] not in tied])
        res = subprocess.run([shardc, "import", str(d), "--format", "json", "--diag-format", "json",
                              "-o", str(Path(tmp) / "imported.json")], capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"dump_model.py: shardc import of the module's params failed:\n{res.stdout}{res.stderr}")
        got = json.loads((Path(tmp) / "imported.json").read_text())
    out = {"model": inv["model"], "dtype": inv["dtype"], "module_order": "module"}
    for key in ("submodels", "tie_word_embeddings"):
        if key in got:
            out[key] = got[key]
    out["tied_weights"] = inv["tied_weights"]
    out["attributes"] = got.get("attributes", {})
    extra = {p["name"]: p for p in got["params"]}
    params = []
    for p in inv["params"]:
        entry = dict(p)
        for key in ("fused", "head_indexed"):
            if key in extra.get(p["name"], {}):
                entry[key] = {k: v for k, v in extra[p["name"]][key].items() if k != "source"}
        params.append(entry)
    out["params"] = params
    return out


def find_shardc(given: str | None) -> str:
    repo = Path(__file__).resolve().parent.parent
    for cand in (given, os.environ.get("SHARDC"), repo / "build/release/shardc",
                 repo / "build/test/shardc", shutil.which("shardc")):
        if cand and Path(cand).is_file():
            return str(cand)
    raise SystemExit("dump_model.py: YAML output needs the shardc binary (--shardc or $SHARDC)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?", help="module:factory, file.py:factory, a checkpoint "
                    "directory or a config.json")
    ap.add_argument("--config", help="config.json of a Hugging Face model (AutoModelForCausalLM)")
    ap.add_argument("-o", "--output", help="OUT.json (plain inventory) or OUT.yaml (compact)")
    ap.add_argument("--name", help="model name (default: the module's class name)")
    ap.add_argument("--shardc", help="shardc binary for YAML output")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("dump_model.py: needs PyTorch (Debian: apt-get install python3-torch)")
    config_path = args.config
    if config_path is None and args.spec and Path(args.spec).is_dir():
        config_path = str(Path(args.spec) / "config.json")
    elif config_path is None and args.spec and args.spec.endswith(".json"):
        config_path = args.spec
    if config_path is None and not args.spec:
        ap.error("give SPEC, a checkpoint directory, a config.json or --config")
    if config_path is not None:
        config = json.loads(Path(config_path).read_text())
        model = hf_model_from_config(config)
        name = args.name or config.get("_name_or_path", "").rstrip("/").split("/")[-1] or type(model).__name__
        inv = with_import_attributes(inventory(model, name), config, find_shardc(args.shardc))
    else:
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
