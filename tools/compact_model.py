#!/usr/bin/env python3
"""Turn a real parameter inventory (*.params.json) into a compact shardc.model/v1 YAML.

Usage: compact_model.py INVENTORY.json [-o OUT.yaml] [--name NAME]

Runs of consecutive blocks `<prefix>.<n>.<rest>` (layers, then experts inside a layer,
and so on) whose per-block parameter lists are identical modulo the index (same suffixes,
shapes and dtypes, in the same order) become nested `repeat` groups with half-open ranges
(SPEC §3). Module order is kept exactly: expanding the output gives back the inventory's
parameter list, entry for entry. Stdlib only.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

# Repeat variable names by nesting depth: layers, experts, then anything deeper.
VAR_NAMES = ["i", "e", "j", "k", "m", "n"]
_NUM = re.compile(r"^\d+$")


class Param:
    """One parameter entry; `name` may contain already-bound `{var}` placeholders."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name: str, shape: list[int], dtype: str):
        self.name, self.shape, self.dtype = name, list(shape), dtype

    def key(self, cut: int) -> tuple:
        return (self.name[cut:], tuple(self.shape), self.dtype)


class Repeat:
    """A repeat group: `var` over [start, stop) expanding `children`."""

    __slots__ = ("var", "start", "stop", "children")

    def __init__(self, var: str, start: int, stop: int, children: list):
        self.var, self.start, self.stop, self.children = var, start, stop, children


def split_index(name: str) -> tuple[str, int, str] | None:
    """First purely numeric dot-segment: ('model.layers.', 3, '.mlp.x'), or None."""
    segs = name.split(".")
    for pos, seg in enumerate(segs):
        if pos > 0 and _NUM.match(seg):
            head = ".".join(segs[:pos]) + "."
            tail = "." + ".".join(segs[pos + 1:]) if pos + 1 < len(segs) else ""
            return head, int(seg), tail
    return None


def blocks_of(params: list[Param]) -> list[tuple[str | None, int, list[Param]]]:
    """Consecutive params grouped by (prefix, index); params without an index stand alone."""
    out: list[tuple[str | None, int, list[Param]]] = []
    for p in params:
        s = split_index(p.name)
        if s is None:
            out.append((None, -1, [p]))
            continue
        head, idx, _ = s
        if out and out[-1][0] == head and out[-1][1] == idx:
            out[-1][2].append(p)
        else:
            out.append((head, idx, [p]))
    return out


def signature(head: str, idx: int, members: list[Param]) -> tuple:
    cut = len(head) + len(str(idx))
    return tuple(p.key(cut) for p in members)


def template(head: str, idx: int, members: list[Param], var: str) -> list[Param]:
    cut = len(head) + len(str(idx))
    return [Param(head + "{" + var + "}" + p.name[cut:], p.shape, p.dtype) for p in members]


def compact(params: list[Param], depth: int = 0) -> list:
    """Returns a list of Param and Repeat nodes whose expansion equals `params`."""
    var = VAR_NAMES[depth] if depth < len(VAR_NAMES) else f"v{depth}"
    blocks = blocks_of(params)
    out: list = []
    pos = 0
    while pos < len(blocks):
        head, idx, members = blocks[pos]
        if head is None:
            out.extend(members)
            pos += 1
            continue
        sig = signature(head, idx, members)
        end = pos + 1
        while end < len(blocks):
            h2, i2, m2 = blocks[end]
            if h2 != head or i2 != idx + (end - pos) or signature(h2, i2, m2) != sig:
                break
            end += 1
        if end - pos >= 2:
            body = compact(template(head, idx, members, var), depth + 1)
            out.append(Repeat(var, idx, idx + (end - pos), body))
        else:
            # A lone block: keep its literal index, but compact what is inside it.
            out.extend(compact_inside(head, idx, members, depth))
        pos = end
    return out


def compact_inside(head: str, idx: int, members: list[Param], depth: int) -> list:
    """Compacts deeper indices of one block without abstracting its own index."""
    cut = len(head) + len(str(idx))
    marker = "\x00"  # hides this block's own index from split_index
    hidden = [Param(head + marker + p.name[cut:], p.shape, p.dtype) for p in members]
    nodes = compact(hidden, depth + 1)
    return [restore(n, marker, str(idx)) for n in nodes]


def restore(node, marker: str, text: str):
    if isinstance(node, Param):
        return Param(node.name.replace(marker, text), node.shape, node.dtype)
    return Repeat(node.var, node.start, node.stop, [restore(c, marker, text) for c in node.children])


def expand(nodes: list, env: dict[str, int] | None = None) -> list[Param]:
    """Expands repeat nodes back to the flat list (used for the self-check)."""
    env = env or {}
    out: list[Param] = []
    for n in nodes:
        if isinstance(n, Param):
            name = n.name
            for k, v in env.items():
                name = name.replace("{" + k + "}", str(v))
            out.append(Param(name, n.shape, n.dtype))
        else:
            for v in range(n.start, n.stop):
                out.extend(expand(n.children, {**env, n.var: v}))
    return out


# ---------------------------------------------------------------- YAML output

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        if _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
            return value
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    raise TypeError(f"cannot emit {type(value).__name__}")


def param_line(p: Param, default_dtype: str) -> str:
    fields = [f"name: {scalar(p.name)}", f"shape: {scalar(p.shape)}"]
    if p.dtype != default_dtype:
        fields.append(f"dtype: {p.dtype}")
    return "{" + ", ".join(fields) + "}"


def emit_nodes(nodes: list, indent: int, default_dtype: str, lines: list[str]) -> None:
    pad = " " * indent
    for n in nodes:
        if isinstance(n, Param):
            lines.append(f"{pad}- {param_line(n, default_dtype)}")
        else:
            lines.append(f"{pad}- repeat: {{{n.var}: [{n.start}, {n.stop}]}}")
            lines.append(f"{pad}  params:")
            emit_nodes(n.children, indent + 4, default_dtype, lines)


def default_dtype_of(inv: dict, params: list[Param]) -> str:
    if isinstance(inv.get("dtype"), str):
        return inv["dtype"]
    counts: dict[str, int] = {}
    for p in params:
        counts[p.dtype] = counts.get(p.dtype, 0) + 1
    return max(counts, key=lambda d: counts[d]) if counts else "float32"


def attributes_of(inv: dict) -> dict:
    attrs = dict(inv.get("attributes") or {})
    if "tie_word_embeddings" in inv and "tie_word_embeddings" not in attrs:
        attrs["tie_word_embeddings"] = bool(inv["tie_word_embeddings"])
    return attrs


def to_yaml(inv: dict, name: str | None, source: str) -> str:
    params = [Param(p["name"], p["shape"], p.get("dtype", inv.get("dtype", "float32")))
              for p in inv["params"]]
    dtype = default_dtype_of(inv, params)
    nodes = compact(params)
    back = expand(nodes)
    assert [(p.name, p.shape, p.dtype) for p in back] == \
        [(p.name, p.shape, p.dtype) for p in params], "compaction does not round-trip"

    model_name = name or inv.get("model") or inv.get("name") or "model"
    lines = [
        f"# {model_name}: compact shardc model description, generated by tools/compact_model.py",
        f"# from {source} (do not edit by hand; run tools/update-models).",
    ]
    for key in ("hf_repo", "architecture", "param_count", "num_tensors", "active_param_count"):
        if key in inv:
            lines.append(f"# {key}: {inv[key]}")
    lines += ["format: shardc.model/v1", f"name: {scalar(model_name)}", f"dtype: {dtype}"]
    attrs = attributes_of(inv)
    if attrs:
        lines.append("attributes:")
        for k, v in attrs.items():
            lines.append(f"  {k}: {scalar(v)}")
    lines.append("params:")
    emit_nodes(nodes, 2, dtype, lines)
    tied = inv.get("tied_weights") or {}
    ties = [[src, alias] for alias, src in tied.items()]
    ties += [list(t) for t in inv.get("tied", []) if list(t) not in ties]
    if ties:
        lines.append("tied:")
        for src, alias in ties:
            lines.append(f"  - [{scalar(src)}, {scalar(alias)}]")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inventory")
    ap.add_argument("-o", "--output", help="output file (default: stdout)")
    ap.add_argument("--name", help="model name (default: the inventory's `model`)")
    args = ap.parse_args(argv)
    opener = open
    if args.inventory.endswith(".gz"):
        import gzip
        opener = gzip.open  # type: ignore[assignment]
    with opener(args.inventory, "rt", encoding="utf-8") as f:
        inv = json.load(f)
    text = to_yaml(inv, args.name, args.inventory.split("/")[-1])
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        import os
        os.replace(tmp, args.output)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
