"""torch.distributed plumbing shared by the all-gathers and the reshard.

Every collective moves raw bytes (torch.uint8 tensors), so any dtype — bf16,
float8, bool, mixed dtypes in one FSDP2 unit — crosses gloo bit for bit.

torch's `new_group(ranks)` orders the group by ascending global rank, while
shardc lists a group's ranks by split coordinate (rank-file order). `all_gather`
below returns the pieces in the *rank file's* order.
"""

import numpy as np


class Groups:
    """Process groups by rank list, created collectively.

    `ensure(rank_lists)` must be called by every process of the default group
    with the rank lists it needs (possibly none): the lists are exchanged
    (all_gather_object), and every group any process needs is created on all
    of them in one sorted order, as `torch.distributed.new_group` requires.
    """

    def __init__(self):
        self._groups = {}

    def ensure(self, rank_lists):
        import torch.distributed as dist

        mine = sorted({tuple(sorted(r)) for r in rank_lists if len(r) > 1})
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        for key in sorted({tuple(k) for lst in everyone for k in lst}):
            if key not in self._groups:
                self._groups[key] = dist.new_group(list(key))

    def get(self, ranks):
        """The group of `ranks` (any order); call `ensure` first."""
        return self._groups[tuple(sorted(ranks))]


def all_gather(groups, ranks, data):
    """All-gather the uint8 numpy array `data` (same size on every member) over
    `ranks` (rank-file order). Returns a [len(ranks), data.size] uint8 array whose
    row k is member k's data."""
    import torch
    import torch.distributed as dist

    if len(ranks) == 1:
        return data.reshape(1, -1).copy()
    if data.size == 0:  # e.g. an EP rank without experts: every member's slot is empty,
        return np.zeros((len(ranks), 0), np.uint8)  # and gloo aborts on 0-byte all-gathers
    t = torch.from_numpy(np.ascontiguousarray(data))
    outs = [torch.empty_like(t) for _ in ranks]
    dist.all_gather(outs, t, group=groups.get(ranks))
    by_rank = {r: o for r, o in zip(sorted(ranks), outs)}  # torch orders groups by rank
    return np.stack([by_rank[r].numpy() for r in ranks])
