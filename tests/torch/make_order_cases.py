"""tests/cases/5[0,2-7]_order_*: Writes the shard-order cases: expected.json computed by PyTorch 2.13 itself.

Per param and rank, DTensor builds the layout under LocalTensorMode (every rank's data in
one process): arange data redistributed from Replicate to a DTensorSpec with the explicit
shard_order (use_strided_shard_as_shard_order=False), i.e. DTensor's own execution-order
semantics; the local tensor must be one contiguous run of global rows, whose start and
length are the expected global_offset and local_shape (empty: offset = the dim's extent).
Labels: DTensorSpec._convert_shard_order_to_StridedShard. W-STRIDED expected where
_compute_local_shape_and_global_offset on those labels reads other rows.
Where a case comes from test/distributed/tensor/test_utils.py, the test's own assertion
formula is checked against what DTensor built (assert_formula)."""
import itertools, json, os, sys
import torch
import torch.distributed as dist
from torch.distributed._local_tensor import LocalTensorMode
from torch.distributed.tensor import DeviceMesh, distribute_tensor, Shard, Replicate
from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry
from torch.distributed.tensor._redistribute import redistribute_local_tensor
from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

def label(p):
    from torch.distributed.tensor.placement_types import _StridedShard
    if isinstance(p, _StridedShard):
        return f"_StridedShard({p.dim}, sf={p.split_factor})"
    if isinstance(p, Shard):
        return f"Shard({p.dim})"
    return "Replicate()"

def dim_layout(L, sizes, order, world):
    """{coord tuple: (start, size)} for one dim of extent L split over mesh dims `order`."""
    mesh = DeviceMesh("cpu", torch.arange(world).view(*sizes))
    pls = tuple(Shard(0) if m in order else Replicate() for m in range(len(sizes)))
    so = (ShardOrderEntry(0, tuple(order)),)
    x = torch.arange(L)
    rep = distribute_tensor(x, mesh, tuple(Replicate() for _ in sizes))
    spec = DTensorSpec(mesh, pls, tensor_meta=rep._spec.tensor_meta, shard_order=so,
                       use_strided_shard_as_shard_order=False)
    local = redistribute_local_tensor(rep.to_local(), rep._spec, spec, use_graph_based_transform=True)
    labels = DTensorSpec._convert_shard_order_to_StridedShard(so, pls, mesh)
    strided = distribute_tensor(x, mesh, labels, src_data_rank=None).to_local()
    out, differs = {}, []
    for r in range(world):
        coord = list(torch.unravel_index(torch.tensor(r), sizes))
        coord = [int(c) for c in coord]
        vals = local._local_tensors[r].tolist()
        if vals:
            assert vals == list(range(vals[0], vals[0] + len(vals))), (L, order, r, vals)
            got = (vals[0], len(vals))
        else:
            got = (L, 0)
        out[tuple(coord)] = got
        n, off = _compute_local_shape_and_global_offset((L,), sizes, coord, labels)
        # the labels' reading: the helper's (shape, first offset) and distribute_tensor's rows
        if strided._local_tensors[r].tolist() != vals or n[0] != len(vals) or (
                vals and off[0] != vals[0]):
            differs.append(r)
    return out, [label(p) for p in labels], differs

def write_case(root, name, readme, mesh_axes, params, ranks=None, formula=None, extra_rules=()):
    """params: list of (name, shape, {dim: [axis names in order]}, default_dims{dim:[axes mesh order]})"""
    sizes = [s for _, s in mesh_axes]
    names = [n for n, _ in mesh_axes]
    world = 1
    for s in sizes: world *= s
    ranks = ranks if ranks is not None else list(range(world))
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    model = ["format: shardc.model/v1", f"name: {name.replace('_', '-')}", "dtype: float32", "params:"]
    recipe = ["format: shardc.recipe/v1", "mesh:"] + [f"  - {{name: {n}, size: {s}}}" for n, s in mesh_axes] + ["rules:"]
    exp_params, warnings, per_rank = [], [], {}
    layouts = {}
    for i, (pname, shape, orders, write_order) in enumerate(params):
        model.append(f"  - {{name: {pname}, shape: [{', '.join(map(str, shape))}]}}")
        pl = ", ".join(f"{ax}: Shard({dim})" for dim, axes in orders.items() for ax in axes)
        so = ", ".join(f"{dim}: [{', '.join(axes)}]" for dim, axes in orders.items())
        recipe.append(f"  - match: {pname}")
        recipe.append(f"    placements: {{{pl}}}")
        if write_order:
            recipe.append(f"    shard_order: {{{so}}}")
        labels = ["Replicate()"] * len(sizes)
        dims = {}
        for dim, axes in orders.items():
            order = [names.index(a) for a in axes]
            lay, labs, differs = dim_layout(shape[dim], sizes, order, world)
            dims[dim] = lay
            for m in order:
                labels[m] = labs[m].replace("(0", f"({dim}", 1)
            if differs:
                warnings.append({"code": "W-STRIDED", "param": pname})
        layouts[pname] = (shape, dims)
        exp_params.append({"name": pname, "dtype": "float32", "global_shape": list(shape), "mesh": "dense",
                           "placements": labels, "uneven": "chunk",
                           "rule": {"kind": "rule", "index": i, "match": pname}, "stage": 0,
                           "alias_of": None, "stacked_from": None, "requires_grad": True})
    for r in ranks:
        coord = [int(c) for c in torch.unravel_index(torch.tensor(r), sizes)]
        ps = {}
        for pname, (shape, dims) in layouts.items():
            local, off = list(shape), [0] * len(shape)
            for dim, lay in dims.items():
                start, n = lay[tuple(coord)]
                local[dim], off[dim] = n, start
            for dim in range(len(shape)):
                if local[dim] == 0:
                    off = [shape[k] if local[k] == 0 else off[k] for k in range(len(shape))]
            ps[pname] = {"local_shape": local, "global_offset": off, "padded_shape": local,
                         "alias_of": None, "stage": 0}
            if formula and pname in formula:
                want = formula[pname](coord)
                assert want == (local, off), (name, pname, coord, want, local, off)
        per_rank[str(r)] = {"coords": {"dense": dict(zip(names, coord)), "expert": None}, "stage": 0, "params": ps}
    exp = {"oracle": "pytorch-2.13-dtensor", "case": name, "model": "model.yaml", "recipe": "recipe.yaml",
           "expect_error": None, "world_size": world,
           "meshes": {"dense": [{"name": n, "size": s} for n, s in mesh_axes], "expert": None},
           "ranks": ranks, "warnings": warnings, "tie_sync_groups": [], "params": exp_params,
           "per_rank": per_rank}
    open(os.path.join(d, "model.yaml"), "w").write("\n".join(model) + "\n")
    open(os.path.join(d, "recipe.yaml"), "w").write("\n".join(recipe) + "\n")
    open(os.path.join(d, "README"), "w").write(readme + "\n")
    with open(os.path.join(d, "expected.json"), "w") as f:
        f.write(json.dumps(exp, indent=1) + "\n")
    print(name, "warnings:", warnings)

ROOT = sys.argv[1]
CASE = sys.argv[2]

def run(world, fn):
    dist.init_process_group("fake", rank=0, world_size=world)
    with LocalTensorMode(ranks=world):
        fn()

if CASE == "50":
    # test_utils.py LocalTest.test_compute_local_shape_and_global_offset_uneven ("S, S uneven
    # without empty", "S, S uneven with empty", "SS, Shard") and UtilTest
    # test_fsdp_tp_meta_compute / test_uneven_fsdp_tp_meta_compute: mesh (DP=4, TP=2)
    def f():
        def ss_shard_18(c):  # "SS, Shard": size 3 at tp*9 + 3*dp; dp 3 empty at 18
            dp, tp = c
            return ([0, 2], [18, 0]) if dp == 3 else ([3, 2], [tp * 9 + 3 * dp, 0])
        def s_s_18(c):  # "S, S uneven without empty"
            dp, tp = c
            if dp < 3:
                return ([3, 2], [5 * dp, 0]) if tp == 0 else ([2, 2], [5 * dp + 3, 0])
            return ([2, 2], [15, 0]) if tp == 0 else ([1, 2], [17, 0])
        def s_s_13(c):  # "S, S uneven with empty"
            dp, tp = c
            if dp < 3:
                return ([2, 2], [4 * dp + 2 * tp, 0])
            return ([1, 2], [12, 0]) if tp == 0 else ([0, 2], [13, 0])
        def fsdp_tp_16(c):  # test_fsdp_tp_meta_compute: shard index tp * dp_size + dp
            dp, tp = c
            return ([2, 2], [(tp * 4 + dp) * 2, 0])
        def uneven_15(c):  # test_uneven_fsdp_tp_meta_compute (rank = dp * 2 + tp)
            r = c[0] * 2 + c[1]
            return ([[2, 2, 2, 2, 2, 2, 2, 1][r], 5], [[0, 8, 2, 10, 4, 12, 6, 14][r], 0])
        write_case(ROOT, "50_order_test_utils_dp4_tp2",
                   "shard_order {0: [tp, dp]} = DTensor's [_StridedShard(0, sf=2), Shard(0)] on mesh (dp 4, tp 2), and the default order stated or not: the assertions of PyTorch's test/distributed/tensor/test_utils.py (SS/Shard, S/S uneven with and without empty, fsdp_tp_meta_compute, uneven_fsdp_tp_meta_compute); expected.json built by DTensor 2.13 (LocalTensorMode, explicit shard_order).",
                   [("dp", 4), ("tp", 2)],
                   [("ss_shard_18", [18, 2], {0: ["tp", "dp"]}, True),
                    ("s_s_18_explicit", [18, 2], {0: ["dp", "tp"]}, True),
                    ("s_s_13", [13, 2], {0: ["dp", "tp"]}, False),
                    ("fsdp_tp_16", [16, 2], {0: ["tp", "dp"]}, True),
                    ("uneven_15x5", [15, 5], {0: ["tp", "dp"]}, True)],
                   formula={"ss_shard_18": ss_shard_18, "s_s_18_explicit": s_s_18, "s_s_13": s_s_13,
                            "fsdp_tp_16": fsdp_tp_16, "uneven_15x5": uneven_15})
    run(8, f)
elif CASE == "51":
    def f():
        def big(c):  # 4096 over DP 30 x TP 8, [_StridedShard(0, sf=8), Shard(0)]
            dp, tp = c
            if dp == 29:
                return ([0, 4096], [4096, 0])
            return ([8 if dp == 28 else 18, 4096], [tp * 512 + 18 * dp, 0])
        write_case(ROOT, "51_order_dp30_tp8_empty",
                   "shard_order {0: [tp, dp]} on mesh (dp 30, tp 8), [4096, 4096]: most ranks 18 rows, dp 28 eight, dp 29 none (offset 4096): PyTorch's test_utils.py test_compute_local_shape_and_global_offset_uneven ([_StridedShard(0, sf=8), Shard(0)]); expected.json built by DTensor 2.13.",
                   [("dp", 30), ("tp", 8)],
                   [("w", [4096, 4096], {0: ["tp", "dp"]}, True)],
                   ranks=[0, 1, 7, 8, 100, 223, 224, 225, 231, 232, 239], formula={"w": big})
    run(240, f)
elif CASE == "52":
    def f():
        def m3(c):  # test_compute_local_shape_and_global_offset_3D
            return ([2, 16], [4 * c[0] + 8 * c[1] + 2 * c[2], 0])
        def hsdp(c):  # test_hsdp_tp_meta_compute: mesh (dp_replic, dp_shard, tp)
            return ([2, 2], [(c[2] * 2 + c[1]) * 2, 0])
        write_case(ROOT, "52_order_mesh3d_2x2x2",
                   "mesh (m0 2, m1 2, m2 2): shard_order {0: [m1, m0, m2]} = [_StridedShard(0, sf=2), Shard(0), Shard(0)] on [16, 16] (test_compute_local_shape_and_global_offset_3D) and {0: [m2, m1]} = [Replicate(), _StridedShard(0, sf=2), Shard(0)] on [8, 2] (test_hsdp_tp_meta_compute, m0 = dp_replic): PyTorch's test_utils.py assertions; expected.json built by DTensor 2.13.",
                   [("m0", 2), ("m1", 2), ("m2", 2)],
                   [("w3d", [16, 16], {0: ["m1", "m0", "m2"]}, True),
                    ("hsdp_tp", [8, 2], {0: ["m2", "m1"]}, True)],
                   formula={"w3d": m3, "hsdp_tp": hsdp})
    run(8, f)
elif CASE == "53":
    def f():
        def m4(c):  # test_compute_local_shape_and_global_offset_4D, first placements
            return ([8, 4], [8 * c[2] + 4 * c[0], 8 * c[3] + 4 * c[1]])
        write_case(ROOT, "53_order_mesh4d_two_dims",
                   "mesh (m0 1, m1 2, m2 2, m3 2), [16, 16]: shard_order {0: [m2, m0], 1: [m3, m1]} = [_StridedShard(0, sf=2), _StridedShard(1, sf=2), Shard(0), Shard(1)] (test_compute_local_shape_and_global_offset_4D): two dims ordered at once; expected.json built by DTensor 2.13.",
                   [("m0", 1), ("m1", 2), ("m2", 2), ("m3", 2)],
                   [("w4d", [16, 16], {0: ["m2", "m0"], 1: ["m3", "m1"]}, True)],
                   formula={"w4d": m4})
    run(8, f)
elif CASE == "54":
    def f():
        write_case(ROOT, "54_order_three_axes_uneven",
                   "mesh (a 4, b 3, c 2), shard_order {0: [c, a, b]} (the example of DTensor's _convert_shard_order_to_StridedShard: [_StridedShard(0, sf=2), _StridedShard(0, sf=2), Shard(0)]) on 24 rows (even), 23 (uneven), 5 (empty pieces) and {1: [b, a]} on 7 columns; where DTensor's _StridedShard reading differs from the order's nested chunks, W-STRIDED; expected.json built by DTensor 2.13.",
                   [("a", 4), ("b", 3), ("c", 2)],
                   [("even24", [24, 3], {0: ["c", "a", "b"]}, True),
                    ("uneven23", [23, 3], {0: ["c", "a", "b"]}, True),
                    ("empty5", [5, 3], {0: ["c", "a", "b"]}, True),
                    ("cols7", [2, 7], {1: ["b", "a"]}, True)])
    run(24, f)
elif CASE == "55":
    def f():
        write_case(ROOT, "55_order_uneven_strided_dim1",
                   "mesh (fsdp 2, tp 2), [1, n] for n = 2, 3, 5, 11 with shard_order {1: [tp, fsdp]} = [_StridedShard(1, sf=2), Shard(1)]: PyTorch's test_utils.py test_2d_mesh_uneven_strided_shard (full_tensor round trip), and 9 rows where DTensor's _StridedShard reading differs (W-STRIDED); expected.json built by DTensor 2.13.",
                   [("fsdp", 2), ("tp", 2)],
                   [("n2", [1, 2], {1: ["tp", "fsdp"]}, True),
                    ("n3", [1, 3], {1: ["tp", "fsdp"]}, True),
                    ("n5", [1, 5], {1: ["tp", "fsdp"]}, True),
                    ("n11", [1, 11], {1: ["tp", "fsdp"]}, True)])
    run(4, f)
elif CASE == "56":
    def f():
        write_case(ROOT, "56_order_mesh5d_32cube",
                   "mesh 2x2x2x2x2 (a..e), [32, 32, 32]: shard orders as PyTorch's test_utils.py Test_StridedShard_with_shard_order draws them (every mesh dim on some tensor dim, any execution order): {0: [e, c, a], 2: [b, d]}, {1: [d, a, e, b, c]}, {0: [b], 1: [e, a], 2: [d, c]}; expected.json built by DTensor 2.13.",
                   [("a", 2), ("b", 2), ("c", 2), ("d", 2), ("e", 2)],
                   [("p", [32, 32, 32], {0: ["e", "c", "a"], 2: ["b", "d"]}, True),
                    ("q", [32, 32, 32], {1: ["d", "a", "e", "b", "c"]}, True),
                    ("r", [32, 32, 32], {0: ["b"], 1: ["e", "a"], 2: ["d", "c"]}, True)])
    run(32, f)
elif CASE == "57":
    def f():
        write_case(ROOT, "57_order_reading_differs_9",
                   "mesh (dp 4, tp 2), 9 rows, shard_order {0: [tp, dp]}: DTensor's shard order (redistribute) gives dp 3 / tp 1 row 8, but its _StridedShard(0, sf=2) label reads row 8 at dp 3 / tp 0: the plan states the order, W-STRIDED names ranks 6 and 7; expected.json built by DTensor 2.13.",
                   [("dp", 4), ("tp", 2)],
                   [("v9", [9], {0: ["tp", "dp"]}, True)])
    run(8, f)
elif CASE == "58":
    # _StridedShard labels that are no shard order (_maybe_convert_StridedShard_to_shard_order
    # returns None): DTensor still reads them (placement_types.py _StridedShard._split_tensor,
    # _utils.py _compute_local_shape_and_global_offset); a rank's rows are several runs, which
    # shardc states as boxes. Every rank's rows come from distribute_tensor under
    # LocalTensorMode; local_shape / global_offset (first row) from
    # _compute_local_shape_and_global_offset; the assertions of PyTorch's test_utils.py
    # (test_compute_local_shape_and_global_offset_uneven "SS, SS", "(Shard, SS)",
    # "(Shard, SS, Shard)") are checked against both.
    from torch.distributed.tensor.placement_types import _StridedShard

    def parse(text):
        if text.startswith("_StridedShard"):
            dim, sf = text[len("_StridedShard("):-1].split(", sf=")
            return _StridedShard(int(dim), split_factor=int(sf))
        if text.startswith("Shard"):
            return Shard(int(text[len("Shard("):-1]))
        return Replicate()

    def runs(rows):
        out = []
        for local, row in enumerate(rows):
            if out and out[-1][0] + out[-1][2] == row:
                out[-1][2] += 1
            else:
                out.append([row, local, 1])
        return out

    def write_label_case(name, readme, mesh_axes, params, formula):
        sizes = [s for _, s in mesh_axes]
        names = [n for n, _ in mesh_axes]
        world = 1
        for s in sizes: world *= s
        mesh = DeviceMesh("cpu", torch.arange(world).view(*sizes))
        d = os.path.join(ROOT, name)
        os.makedirs(d, exist_ok=True)
        model = ["format: shardc.model/v1", f"name: {name.replace('_', '-')}", "dtype: float32", "params:"]
        recipe = ["format: shardc.recipe/v1", "mesh:"] + [f"  - {{name: {n}, size: {s}}}" for n, s in mesh_axes] + ["rules:"]
        exp_params, per_rank = [], {str(r): {} for r in range(world)}
        for i, (pname, shape, labels) in enumerate(params):
            model.append(f"  - {{name: {pname}, shape: [{', '.join(map(str, shape))}]}}")
            pl = ", ".join(f'{ax}: "{lab}"' for ax, lab in zip(names, labels) if lab != "Replicate()")
            recipe += [f"  - match: {pname}", f"    placements: {{{pl}}}"]
            exp_params.append({"name": pname, "dtype": "float32", "global_shape": list(shape), "mesh": "dense",
                               "placements": labels, "uneven": "chunk",
                               "rule": {"kind": "rule", "index": i, "match": pname}, "stage": 0,
                               "alias_of": None, "stacked_from": None, "requires_grad": True})
            pls = [parse(t) for t in labels]
            sdim = next(p.dim for p in pls if isinstance(p, _StridedShard))
            # value = the row index on the strided dim (other dims: one column each of the same)
            view = [1] * len(shape)
            view[sdim] = shape[sdim]
            x = torch.arange(shape[sdim]).view(view).expand(*shape).contiguous()
            local = distribute_tensor(x, mesh, pls, src_data_rank=None).to_local()
            for r in range(world):
                coord = [int(c) for c in torch.unravel_index(torch.tensor(r), sizes)]
                n, off = _compute_local_shape_and_global_offset(tuple(shape), sizes, coord, pls)
                t = local._local_tensors[r]
                assert list(t.shape) == list(n), (pname, r, t.shape, n)
                rows = t.movedim(sdim, 0).reshape(t.shape[sdim], -1)[:, 0].tolist() if t.numel() else []
                if rows:
                    assert off[sdim] == rows[0], (pname, r, off, rows)
                want = formula[pname](coord)
                assert want is None or (list(n), list(off)) == want, (pname, coord, n, off, want)
                entry = {"local_shape": list(n), "global_offset": list(off), "padded_shape": list(n),
                         "alias_of": None, "stage": 0}
                boxes = []
                for row, at, count in (runs(rows) if all(k > 0 for k in n) else []):
                    g = list(off); g[sdim] = row
                    lo = [0] * len(shape); lo[sdim] = at
                    s = list(n); s[sdim] = count
                    boxes.append({"global_offset": g, "local_offset": lo, "shape": s})
                entry["boxes"] = boxes
                per_rank[str(r)][pname] = entry
        ranks = list(range(world))
        exp = {"oracle": "pytorch-2.13-dtensor", "case": name, "model": "model.yaml", "recipe": "recipe.yaml",
               "expect_error": None, "world_size": world,
               "meshes": {"dense": [{"name": n, "size": s} for n, s in mesh_axes], "expert": None},
               "ranks": ranks, "warnings": [], "tie_sync_groups": [], "params": exp_params,
               "per_rank": {str(r): {"coords": {"dense": dict(zip(names, [int(c) for c in torch.unravel_index(torch.tensor(r), sizes)])), "expert": None},
                                     "stage": 0, "params": per_rank[str(r)]} for r in ranks}}
        open(os.path.join(d, "model.yaml"), "w").write("\n".join(model) + "\n")
        open(os.path.join(d, "recipe.yaml"), "w").write("\n".join(recipe) + "\n")
        open(os.path.join(d, "README"), "w").write(readme + "\n")
        with open(os.path.join(d, "expected.json"), "w") as f:
            f.write(json.dumps(exp, indent=1) + "\n")
        print(name)

    def ss_ss_39(c):  # test_utils.py "SS, SS"
        dp, tp = c
        if dp < 3:
            return ([8, 2], [4 * dp, 0]) if tp == 0 else ([4, 2], [4 * dp + 2, 0])
        return ([3, 2], [12, 0]) if tp == 0 else ([0, 2], [39, 0])

    def s_ss_18(c):  # test_utils.py "(Shard, SS)"
        dp, tp = c
        if dp < 3:
            return ([3, 2], [5 * dp, 0]) if tp == 0 else ([2, 2], [5 * dp + 2, 0])
        return ([2, 2], [15, 0]) if tp == 0 else ([1, 2], [16, 0])

    def s_ss_s_39(c):  # test_utils.py "(Shard, SS, Shard)"
        m0, m1, m2 = c
        if m0 < 3:
            table = {(0, 0): (2, 0), (0, 1): (2, 2), (0, 2): (2, 6), (1, 0): (2, 3), (1, 1): (2, 8)}
            if (m1, m2) == (1, 2):
                return ([0, 2], [39, 0])
            n, o = table[(m1, m2)]
            return ([n, 2], [10 * m0 + o, 0])
        table = {(0, 0): (2, 0), (0, 1): (2, 2), (0, 2): (1, 6), (1, 0): (2, 3), (1, 1): (2, 7)}
        if (m1, m2) == (1, 2):
            return ([0, 2], [39, 0])
        n, o = table[(m1, m2)]
        return ([n, 2], [30 + o, 0])

    def general(c):  # no formula in the test: _compute_local_shape_and_global_offset's own answer
        return None

    def f2():
        write_label_case(
            "58_strided_not_an_order_dp4_tp2",
            "_StridedShard labels that are no shard order, as DTensor reads them: [_StridedShard(0, sf=3), _StridedShard(0, sf=4)] on 39 rows and [Shard(0), _StridedShard(0, sf=2)] on 18 rows, mesh (dp 4, tp 2) (PyTorch's test_utils.py test_compute_local_shape_and_global_offset_uneven, \"SS, SS\" and \"(Shard, SS)\"): several boxes per rank; expected.json built by DTensor 2.13 (distribute_tensor under LocalTensorMode, every rank's rows).",
            [("dp", 4), ("tp", 2)],
            [("ss_ss_39", [39, 2], ["_StridedShard(0, sf=3)", "_StridedShard(0, sf=4)"]),
             ("s_ss_18", [18, 2], ["Shard(0)", "_StridedShard(0, sf=2)"])],
            {"ss_ss_39": ss_ss_39, "s_ss_18": s_ss_18})

    def f3():
        write_label_case(
            "59_strided_not_an_order_4x2x3",
            "[Shard(0), _StridedShard(0, sf=2), Shard(0)] on 39 rows, mesh (m0 4, m1 2, m2 3) (PyTorch's test_utils.py \"(Shard, SS, Shard)\"), and [_StridedShard(1, sf=2), Replicate(), Shard(0)] on [7, 10] (a strided dim beside a plain split of another dim): several boxes per rank, empty pieces at the sentinel; expected.json built by DTensor 2.13 (distribute_tensor under LocalTensorMode).",
            [("m0", 4), ("m1", 2), ("m2", 3)],
            [("s_ss_s_39", [39, 2], ["Shard(0)", "_StridedShard(0, sf=2)", "Shard(0)"]),
             ("ss1_s0", [7, 10], ["_StridedShard(1, sf=2)", "Replicate()", "Shard(0)"])],
            {"s_ss_s_39": s_ss_s_39, "ss1_s0": general})
    run(8, f2)
    dist.destroy_process_group()
    run(24, f3)
