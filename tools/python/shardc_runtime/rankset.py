"""Rank sets and ordered rank lists in shardc's syntax (docs/commands.md "Rank sets").

`0-7,16,3-2043:8`: comma-separated items `a`, `a-b` (inclusive) or `a-b:s`
(a, a+s, ..., b). Parsed as progressions, never expanded into a list: a
`RankList` is a `Sequence[int]` (length, indexing, membership in O(items)),
so a hostile string such as `0-10000000000` costs constant memory and is
refused in microseconds. The bounds are shardc's own (src/support/rank_set.cpp,
`RankSet::parse` / `parse_rank_list`): every item `a <= b`, step >= 1, ranks
non-negative and below the world size, at most 2^24 ranks in one string.
`parse_rank_set` gives the sorted distinct set (`RankSet`); `parse_rank_list`
keeps the written order (group members by split coordinate).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from .errors import PlanError

MAX_PARSED_ITEMS = 1 << 24  # shardc: kMaxParsedItems, "more than 2^24 ranks"
MAX_WORLD_SIZE = 2**31 - 1  # shardc: limits::kMaxWorld


@dataclass(frozen=True)
class Progression:
    """start, start + step, ..., start + (count - 1) * step (count >= 1, step >= 1)."""

    start: int
    step: int
    count: int

    @property
    def last(self) -> int:
        return self.start + (self.count - 1) * self.step

    def __contains__(self, rank: object) -> bool:
        return (isinstance(rank, int) and self.start <= rank <= self.last
                and (rank - self.start) % self.step == 0)


@dataclass(frozen=True)
class RankList(Sequence[int]):
    """An ordered list of ranks held as progressions (written order kept)."""

    runs: tuple[Progression, ...]
    _ends: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ends, total = [], 0
        for run in self.runs:
            total += run.count
            ends.append(total)
        object.__setattr__(self, "_ends", tuple(ends))

    @classmethod
    def of(cls, ranks: Sequence[int]) -> RankList:
        """A RankList of explicit ranks (one single-rank run each)."""
        return cls(tuple(Progression(int(r), 1, 1) for r in ranks))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"rank list index {index} outside {len(self)} ranks")
        k = bisect.bisect_right(self._ends, index)
        before = self._ends[k - 1] if k else 0
        run = self.runs[k]
        return run.start + (index - before) * run.step

    def __iter__(self) -> Iterator[int]:
        for run in self.runs:
            yield from range(run.start, run.last + 1, run.step)

    def __contains__(self, rank: object) -> bool:
        return any(rank in run for run in self.runs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RankList):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        if isinstance(other, (list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def position(self, rank: int) -> int:
        """Index of the first occurrence of `rank`; PlanError when absent."""
        for run, end in zip(self.runs, self._ends):
            if rank in run:
                return end - run.count + (rank - run.start) // run.step
        raise PlanError(f"rank {rank} is not in the rank list")


def _number(text: str, where: str) -> int:
    if not text.isdigit():
        raise PlanError(f"{where}: {text!r} is not a non-negative integer")
    if len(text) > 19:
        raise PlanError(f"{where}: {text!r} is out of range")
    return int(text)


def _runs(text: str, world_size: int, where: str) -> tuple[Progression, ...]:
    if not isinstance(text, str):
        raise PlanError(f"{where}: {type(text).__name__} instead of a rank string such as '0-7'")
    if not 1 <= world_size <= MAX_WORLD_SIZE:
        raise PlanError(f"{where}: world size {world_size} outside [1, 2^31 - 1]")
    runs, total = [], 0
    if not text.strip():
        return ()
    for item in text.split(","):
        item = item.strip()
        step = 1
        if ":" in item:
            item, step_text = item.split(":", 1)
            step = _number(step_text, where)
            if step < 1:
                raise PlanError(f"{where}: step {step} in {text!r} is not positive")
        if "-" in item:
            first_text, last_text = item.split("-", 1)
            first, last = _number(first_text, where), _number(last_text, where)
            if last < first:
                raise PlanError(f"{where}: reversed range {first}-{last} in {text!r}")
        else:
            first = last = _number(item, where)
        count = (last - first) // step + 1
        run = Progression(first, step, count)
        if run.last >= world_size:
            raise PlanError(f"{where}: rank {run.last} is out of range (world size {world_size})")
        total += count
        if total > MAX_PARSED_ITEMS:
            raise PlanError(f"{where}: more than 2^24 ranks in {text[:40]!r}")
        runs.append(run)
    return tuple(runs)


def parse_rank_list(text: str, world_size: int, where: str = "rank list") -> RankList:
    """Ordered ranks of a rank-list string (order kept, duplicates kept);
    PlanError naming `where` on bad syntax or shardc's bounds."""
    return RankList(_runs(text, world_size, where))


@dataclass(frozen=True)
class RankSet:
    """A sorted set of distinct ranks (plan.json `ranks` of a shard)."""

    ranks: RankList

    @property
    def first(self) -> int:
        return min(run.start for run in self.ranks.runs)

    def __len__(self) -> int:
        return len(self.ranks)

    def __contains__(self, rank: object) -> bool:
        return rank in self.ranks

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(set(self.ranks)))


def parse_rank_set(text: str, world_size: int, where: str = "rank set") -> RankSet:
    """A non-empty rank set (items in any order, as shardc's `RankSet::parse`
    accepts them); PlanError naming `where` otherwise."""
    runs = _runs(text, world_size, where)
    if not runs:
        raise PlanError(f"{where}: empty rank set")
    return RankSet(RankList(runs))
