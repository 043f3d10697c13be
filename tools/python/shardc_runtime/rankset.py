"""Rank sets and ordered rank lists in shardc's syntax (README "Rank sets").

`0-7,16,3-2043:8`: comma-separated items `a`, `a-b` (inclusive) or `a-b:s`
(a, a+s, ..., b). `parse_rank_set` returns the sorted set; `parse_rank_list`
keeps the written order (lean rank files write group members that way).
"""


def _items(text):
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        step = 1
        if ":" in item:
            item, s = item.split(":", 1)
            step = int(s)
        if "-" in item:
            a, b = item.split("-", 1)
            yield from range(int(a), int(b) + 1, step)
        else:
            yield int(item)


def parse_rank_list(value):
    """Ordered list of ranks from a list of ints or a rank-list string."""
    if isinstance(value, list):
        return [int(v) for v in value]
    return list(_items(value))


def parse_rank_set(value):
    """Sorted list of distinct ranks from a rank-set string (or list)."""
    return sorted(set(parse_rank_list(value)))
