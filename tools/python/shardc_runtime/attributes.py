"""Local attributes a runtime sets on a sharded module, as the rank file states them.

`shardc compile` derives them (src/planner/local_attributes.cpp, contract §6.7)
and every rank file carries them under `local_attributes`; this module only reads
and checks that section (one derivation: the C++ one). Values are what the forward
sees after FSDP2's all-gather (the TP / EP shard, never the FSDP piece); ranges are
`range` objects of global ids:

* `head_counts(rank_file)`: {attention module: `Heads`} (query heads, KV heads
  held, and the KV heads the held query heads attend: with k / v replicated over
  ranks that split q (kv < tp), a sub-range of those held); `None` for a module
  whose split cuts a head.
* `expert_ids(rank_file)`: {module holding a layer's stacked experts: the global
  expert ids this rank's EP shard serves} (empty on an EP rank without experts).
* `vocab_range(rank_file, name)`: the token ids a vocab-parallel embedding or head
  holds, and `vocab_padding(rank_file, name)` the padding rows after them.

`shardc_runtime.torch.apply_local_attributes` tells Hugging Face modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import PlanError
from .layout import MAX_EXTENT, RankFile


@dataclass(frozen=True)
class Heads:
    """One attention module on one rank: the global heads its TP-local projections
    hold (`query`, `key_value`) and the KV heads its query heads attend (`kv_used`;
    GQA: query head h uses KV head h // (num_attention_heads // num_key_value_heads))."""

    query: range
    key_value: range
    kv_used: range

    @property
    def q_heads(self) -> int:
        return len(self.query)

    @property
    def kv_heads(self) -> int:
        return len(self.key_value)


@dataclass(frozen=True)
class Experts:
    """One layer of experts on one rank: local expert i is global expert ids[i]."""

    num_experts: int
    ids: range


@dataclass(frozen=True)
class Vocab:
    """One vocab tensor on one rank: local row i is token tokens[i]; then
    `padding_rows` rows that hold no token."""

    vocab_size: int
    tokens: range
    padding_rows: int


@dataclass(frozen=True)
class LocalAttributes:
    """The rank file's `local_attributes`, by module (vocab: by param) FQN."""

    attention: Mapping[str, Heads | None]
    experts: Mapping[str, Experts | None]
    vocab: Mapping[str, Vocab]


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PlanError(f"{where}: {type(value).__name__} instead of an object")
    return value


def _count(value: Any, where: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_EXTENT:
        raise PlanError(f"{where}: {value!r} is not an integer in [{low}, {MAX_EXTENT}]")
    return value


def _range(value: Any, where: str, total: int | None = None) -> range:
    if not isinstance(value, list) or len(value) != 2:
        raise PlanError(f"{where}: {value!r} is not a [start, end) pair")
    start, end = (_count(v, where) for v in value)
    if end < start or (total is not None and end > total):
        raise PlanError(f"{where}: [{start}, {end}) is not a range inside [0, {total})")
    return range(start, end)


def _keys(doc: dict[str, Any], want: set[str], where: str) -> None:
    if set(doc) != want:
        raise PlanError(f"{where}: members {sorted(doc)}, expected {sorted(want)}")


def _heads(doc: Any, where: str) -> Heads | None:
    if doc is None:
        return None
    entry = _obj(doc, where)
    _keys(entry, {"q_heads", "q_head_range", "kv_heads", "kv_head_range", "kv_head_range_used"},
          where)
    heads = Heads(_range(entry["q_head_range"], f"{where}.q_head_range"),
                  _range(entry["kv_head_range"], f"{where}.kv_head_range"),
                  _range(entry["kv_head_range_used"], f"{where}.kv_head_range_used"))
    for key, got in (("q_heads", heads.q_heads), ("kv_heads", heads.kv_heads)):
        if _count(entry[key], f"{where}.{key}") != got:
            raise PlanError(f"{where}: {key} {entry[key]} is not the size of its range ({got})")
    return heads


def _experts(doc: Any, where: str) -> Experts | None:
    if doc is None:
        return None
    entry = _obj(doc, where)
    _keys(entry, {"num_experts", "local_experts", "expert_range"}, where)
    total = _count(entry["num_experts"], f"{where}.num_experts", 1)
    ids = _range(entry["expert_range"], f"{where}.expert_range", total)
    if _count(entry["local_experts"], f"{where}.local_experts") != len(ids):
        raise PlanError(f"{where}: local_experts {entry['local_experts']} is not the size of "
                        f"expert_range ({len(ids)})")
    return Experts(total, ids)


def _vocab(doc: Any, where: str) -> Vocab:
    entry = _obj(doc, where)
    _keys(entry, {"vocab_size", "token_range", "padding_rows"}, where)
    total = _count(entry["vocab_size"], f"{where}.vocab_size", 1)
    return Vocab(total, _range(entry["token_range"], f"{where}.token_range", total),
                 _count(entry["padding_rows"], f"{where}.padding_rows"))


def local_attributes(rank_file: RankFile) -> LocalAttributes:
    """The rank file's `local_attributes` section, checked (PlanError naming the file
    and field: a missing section, a wrong type, a range outside its count, a count that
    is not its range's size, a vocab entry for a param the rank does not hold)."""
    where = f"{rank_file.path}: local_attributes"
    if "local_attributes" not in rank_file.doc:
        raise PlanError(f"{where}: missing (compiled by a shardc without local attributes; "
                        "compile again)")
    doc = _obj(rank_file.doc["local_attributes"], where)
    _keys(doc, {"attention", "experts", "vocab"}, where)
    vocab = {name: _vocab(v, f"{where}.vocab[{name!r}]")
             for name, v in _obj(doc["vocab"], f"{where}.vocab").items()}
    for name, v in vocab.items():
        info = rank_file.params.get(name)
        if info is None or info.global_shape[0] != v.vocab_size:
            raise PlanError(f"{where}.vocab[{name!r}]: not a vocab tensor this rank holds with "
                            f"{v.vocab_size} rows")
    return LocalAttributes(
        {name: _heads(v, f"{where}.attention[{name!r}]")
         for name, v in _obj(doc["attention"], f"{where}.attention").items()},
        {name: _experts(v, f"{where}.experts[{name!r}]")
         for name, v in _obj(doc["experts"], f"{where}.experts").items()},
        vocab)


def head_counts(rank_file: RankFile) -> dict[str, Heads]:
    """{attention module: Heads} of the rank's stage; PlanError for a module whose
    split cuts a head (the rank file's null)."""
    out = {}
    for module, heads in local_attributes(rank_file).attention.items():
        if heads is None:
            raise PlanError(f"{rank_file.path}: {module}: a split cuts a head, the local head "
                            "counts are undefined (see the compile's E-HEADS / W-FUSED-SPLIT)")
        out[module] = heads
    return out


def expert_ids(rank_file: RankFile) -> dict[str, range]:
    """{module holding a layer's stacked experts: the global expert ids this rank
    serves}; PlanError when the layer's params disagree (the rank file's null)."""
    out = {}
    for module, experts in local_attributes(rank_file).experts.items():
        if experts is None:
            raise PlanError(f"{rank_file.path}: {module}: its stacked params split the "
                            "experts differently, no one expert range")
        out[module] = experts.ids
    return out


def _vocab_entry(rank_file: RankFile, name: str) -> Vocab:
    entry = local_attributes(rank_file).vocab.get(name)
    if entry is None:
        raise PlanError(f"{rank_file.path}: {name} is not a vocab tensor of this rank "
                        "(local_attributes.vocab lists the params whose dim 0 is the model's "
                        "vocab_size)")
    return entry


def vocab_range(rank_file: RankFile, name: str) -> range:
    """The token ids vocab tensor `name` (an embedding or output head) holds on this
    rank, as local rows 0..len-1."""
    return _vocab_entry(rank_file, name).tokens


def vocab_padding(rank_file: RankFile, name: str) -> int:
    """Rows of padding after the real rows of vocab tensor `name` on this rank."""
    return _vocab_entry(rank_file, name).padding_rows
