"""Sparse Hugging Face checkpoints for the import tests and the benchmark (stdlib only).

A safetensors file is an 8-byte little-endian header length, the JSON header
(name -> {dtype, shape, data_offsets}) and the data; the data part is left as a
hole (`truncate`), so a 671B checkpoint costs a few MB of headers on disk.

`write_checkpoint` lays an inventory out as the hub would: shards of at most
`shard_bytes` in module order named model-0000k-of-0000n.safetensors, the index
model.safetensors.index.json (weight_map sorted by name), the real config.json;
tied models without lm_head.weight; GPT-2 without the `transformer.` prefix (as
openai-community/gpt2 stores it); optional DeepSeek-V3 FP8 layout (F8_E4M3
weights, each followed by its F32 weight_scale_inv [ceil(O/128), ceil(I/128)]).
"""
from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ST_DTYPES = {"bfloat16": ("BF16", 2), "float32": ("F32", 4), "float16": ("F16", 2),
             "float8_e4m3fn": ("F8_E4M3", 1), "float8_e5m2": ("F8_E5M2", 1),
             "int64": ("I64", 8), "int32": ("I32", 4), "uint8": ("U8", 1), "bool": ("BOOL", 1),
             "float64": ("F64", 8), "int8": ("I8", 1), "int16": ("I16", 2),
             "uint16": ("U16", 2), "uint32": ("U32", 4), "uint64": ("U64", 8),
             "float8_e8m0fnu": ("F8_E8M0", 1)}

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"

# plans/<name>.model.yaml and its shipped recipe for each inventory.
PLANS = {
    "Llama-3.1-8B": ("llama-3.1-8b", "llama-3.1-8b-dp8-tp8"),
    "Llama-3.1-70B": ("llama-3.1-70b", "llama-3.1-70b-hsdp"),
    "Llama-3.1-405B": ("llama-3.1-405b", "llama-3.1-405b-dp2048-tp8"),
    "Qwen2.5-0.5B": ("qwen2.5-0.5b", "qwen2.5-0.5b-dp4-tp2"),
    "Qwen3-30B-A3B": ("qwen3-30b-a3b", "qwen3-30b-a3b-ep8-fsdp"),
    "Qwen3-235B-A22B": ("qwen3-235b-a22b", "qwen3-235b-a22b-tp4-ep64"),
    "Mixtral-8x7B-v0.1": ("mixtral-8x7b", "mixtral-8x7b-ep8-tp8"),
    "DeepSeek-V3": ("deepseek-v3", "deepseek-v3-pp16-ep64"),
    "gpt2": ("gpt2", "gpt2-tp4-tied"),
    "gemma-2-2b": ("gemma-2-2b", "gemma-2-2b-tp4-tied"),
}


def run(cmd: list[str], expect: int = 0) -> subprocess.CompletedProcess:
    """Runs `cmd`; an exit status other than `expect` is an AssertionError (run_checks: FAIL)."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != expect:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode} (want {expect}):\n"
                             f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r


def run_checks(keep: str | None, prefix: str, body) -> int:
    """The scaffolding of the checkpoint tests: `body(work)` runs in a work directory (`keep`,
    kept afterwards, or a fresh temporary one, removed); an AssertionError it raises is printed
    as FAIL and gives exit status 1, else 0."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    try:
        body(work)
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def load_inventory(name: str) -> dict:
    plain = DATA / "models" / f"{name}.params.json"
    if plain.exists():
        return json.loads(plain.read_text())
    with gzip.open(str(plain) + ".gz", "rt", encoding="utf-8") as f:
        return json.load(f)


def load_config(name: str) -> dict:
    configs = json.loads((DATA / "configs.json").read_text())
    for m in configs["models"]:
        if m["name"] == name:
            return m["config"]
    raise KeyError(name)


def write_safetensors(path: Path, tensors: list[tuple[str, str, list[int]]],
                      header_order: str = "name") -> None:
    """tensors: (name, safetensors dtype code, shape), data laid out in list order."""
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    entries = {}
    sizes = {code: size for code, size in ST_DTYPES.values()}
    for name, code, shape in tensors:
        nbytes = math.prod(shape) * sizes[code]
        entries[name] = {"dtype": code, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    for name in (sorted(entries) if header_order == "name" else entries):
        header[name] = entries[name]
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the reference writer pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
    os.truncate(path, 8 + len(blob) + offset)  # the data: a hole


FP8_SKIP = ("embed_tokens", "lm_head", "norm", "layernorm", "mlp.gate.")


def fp8_layout(params: list[dict], block: tuple[int, int]) -> list[dict]:
    """DeepSeek-V3's FP8 checkpoint: 2-D linear weights in F8_E4M3 plus F32 scales."""
    out = []
    for p in params:
        name, shape = p["name"], p["shape"]
        if name.endswith(".weight") and len(shape) == 2 and not any(s in name for s in FP8_SKIP):
            out.append({"name": name, "shape": shape, "dtype": "float8_e4m3fn"})
            scale = [math.ceil(shape[0] / block[0]), math.ceil(shape[1] / block[1])]
            out.append({"name": name + "_scale_inv", "shape": scale, "dtype": "float32"})
        else:
            out.append(p)
    return out


def stored_params(inv: dict, fp8: bool = False) -> list[dict]:
    """The tensors a hub checkpoint stores, in module order (what the test expects back)."""
    params = [dict(p, dtype=p.get("dtype", inv.get("dtype", "float32"))) for p in inv["params"]]
    if fp8:
        params = fp8_layout(params, (128, 128))
    return params


def write_checkpoint(inv: dict, config: dict, out: Path, fp8: bool = False,
                     shard_bytes: int = 5 * 10**9, num_files: int | None = None,
                     hub_names: bool = True) -> list[dict]:
    """Writes the checkpoint directory; returns the params import must give back."""
    out.mkdir(parents=True, exist_ok=True)
    expected = stored_params(inv, fp8)
    aliases = set((inv.get("tied_weights") or {}).keys())
    stored = [p for p in expected if p["name"] not in aliases]

    def file_name_of(name: str) -> str:
        if hub_names and inv.get("architecture") == "GPT2LMHeadModel":
            return name.removeprefix("transformer.")
        return name

    sizes = [math.prod(p["shape"]) * ST_DTYPES[p["dtype"]][1] for p in stored]
    shards: list[list[int]] = [[]]
    if num_files:  # exactly num_files shards of about equal bytes (DeepSeek-V3: 163)
        total_bytes, acc = sum(sizes), 0
        shards = [[] for _ in range(num_files)]
        for i, size in enumerate(sizes):
            shards[min(num_files - 1, acc * num_files // max(1, total_bytes))].append(i)
            acc += size
        shards = [s for s in shards if s]
    else:
        acc = 0
        for i, size in enumerate(sizes):
            if shards[-1] and acc + size > shard_bytes:
                shards.append([])
                acc = 0
            shards[-1].append(i)
            acc += size
    n = len(shards)
    weight_map = {}
    total = 0
    for k, members in enumerate(shards):
        fname = "model.safetensors" if n == 1 else f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        tensors = []
        for i in sorted(members, key=lambda i: (-ST_DTYPES[stored[i]["dtype"]][1],
                                                file_name_of(stored[i]["name"]))):
            p = stored[i]
            tensors.append((file_name_of(p["name"]), ST_DTYPES[p["dtype"]][0], p["shape"]))
            weight_map[file_name_of(p["name"])] = fname
            total += sizes[i]
        write_safetensors(out / fname, tensors)
    if n > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    cfg = dict(config)
    if not fp8:
        cfg.pop("quantization_config", None)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return expected


def main(argv: list[str]) -> int:
    """checkpoint_util.py NAME OUTDIR [--fp8]: write inventory NAME's sparse checkpoint."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("name", help="an inventory of tests/data/models, e.g. Llama-3.1-8B")
    ap.add_argument("outdir")
    ap.add_argument("--fp8", action="store_true", help="DeepSeek-V3's block-FP8 layout")
    args = ap.parse_args(argv)
    params = write_checkpoint(load_inventory(args.name), load_config(args.name), Path(args.outdir),
                              fp8=args.fp8, num_files=163 if args.fp8 else None)
    print(f"{args.outdir}: {len(params)} params")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
