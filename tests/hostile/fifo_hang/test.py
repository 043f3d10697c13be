"""A FIFO (or socket, device, directory) under a name shardc reads as a checkpoint member or an
OUTDIR file fails at once, naming what it is, exit 2; never blocks (README.md here). The Python
adapter's half of this finding (OutDir, Checkpoint) is tested with the adapter."""
import os
import shutil
import socket


def variants(h, ck):
    """(label, directory) pairs: copies of the checkpoint `ck` with one member replaced."""
    out = []

    def copy(label, name, make):
        d = h.tmp / label
        shutil.copytree(ck, d)
        if (d / name).exists():
            os.remove(d / name)
        make(d / name)
        out.append((label, d, name))

    copy("fifo_st", "zz.safetensors", os.mkfifo)
    copy("fifo_cfg", "config.json", os.mkfifo)
    copy("fifo_idx", "model.safetensors.index.json", os.mkfifo)
    copy("fifo_main", "model.safetensors", os.mkfifo)
    copy("link_fifo_st", "zz.safetensors", lambda p: (os.mkfifo(h.tmp / "a_fifo"), os.symlink(h.tmp / "a_fifo", p)))
    copy("sock_st", "zz.safetensors", lambda p: socket.socket(socket.AF_UNIX).bind(str(p)))
    copy("dir_idx", "model.safetensors.index.json", os.mkdir)
    copy("null_st", "zz.safetensors", lambda p: os.symlink("/dev/null", p))
    # Without model.safetensors (and no index) every *.safetensors file is read.
    copy("fifo_st_read", "zz.safetensors", lambda p: (os.mkfifo(p), os.rename(p.parent / "model.safetensors",
                                                                            p.parent / "a.safetensors")))
    return out


EXPECTED = {"fifo_st": "is a FIFO", "fifo_cfg": "is a FIFO", "fifo_idx": "is a FIFO",
            "fifo_main": "is a FIFO", "link_fifo_st": "is a FIFO", "sock_st": "is a socket",
            "dir_idx": "is a directory", "null_st": "is a device", "fifo_st_read": "is a FIFO"}
# Beside model.safetensors with no index, transformers reads model.safetensors alone: the
# other file is left out with W-CHECKPOINT, whose look at its header names what it is.
BESIDE_MODEL = {"fifo_st", "link_fifo_st", "sock_st", "null_st"}


def run(h):
    ck = h.tiny_ckpt(h.tmp / "ck")
    recipe = h.hostile / "tiny.recipe.yaml"
    for label, d, name in variants(h, ck):
        for command in ("validate", "import"):
            args = (d, recipe) if command == "validate" else (d, "-o", h.tmp / f"{label}.yaml")
            r = h.shardc(command, *args, timeout=10)
            if label in BESIDE_MODEL:
                h.expect_exit(r, 0, "W-CHECKPOINT", name, EXPECTED[label])
            else:
                h.expect_exit(r, 2, "E-CHECKPOINT", name, EXPECTED[label])
            h.expect(r.seconds < 5, f"{label} {command}: {r.seconds:.1f} s")
    out = h.tmp / "out"
    h.expect_exit(h.shardc("-q", "compile", ck, recipe, "-o", out), 0)
    for name, make, what in (("ranks/rank-2.json", os.mkfifo, "is a FIFO"),
                             ("manifest.json", os.mkfifo, "is a FIFO"),
                             ("plan.json", os.mkfifo, "is a FIFO"),
                             ("ranks/rank-1.json", lambda p: os.symlink("/dev/zero", p), "is a device"),
                             ("manifest.json", os.mkdir, "is a directory")):
        d = h.tmp / ("out_" + name.replace("/", "_") + what.split()[-1])
        shutil.copytree(out, d)
        os.remove(d / name)
        make(d / name)
        r = h.shardc("verify", d, timeout=10)
        h.expect(r.code in (1, 2) and what in r.text and name.split("/")[-1] in r.text,
                 f"verify with {name} {what}: exit {r.code}: {r.text[-800:]}")
    # An OUTDIR that is itself a FIFO: refused, not opened.
    os.mkfifo(h.tmp / "out_fifo")
    h.expect_exit(h.shardc("verify", h.tmp / "out_fifo", timeout=10), 2, "is a FIFO")
    # MODEL and RECIPE may still be pipes (process substitution): read to the end.
    r = h.shardc("validate", ck, "/dev/stdin", stdin=recipe.read_bytes())
    h.expect_exit(r, 0)
