"""What the model generators of this folder share (titan.py: torchtitan flavors,
hf_prestacked.py: Hugging Face models with pre-stacked experts): tools/dump_model.py as a
module, and writing an inventory with its compact model description."""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GZIP_ABOVE_BYTES = 256 * 1024  # big inventories are stored gzipped, as the others are


def load_dump_model() -> types.ModuleType:
    """tools/dump_model.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("dump_model", REPO / "tools" / "dump_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_model_files(inventory: dict[str, Any], inventory_path: Path, model_path: Path,
                      note: list[str]) -> int:
    """Writes `inventory` as JSON to `inventory_path` (gzipped to `<path>.gz` above
    GZIP_ABOVE_BYTES), its compact model description to `model_path` with `shardc import`
    ($SHARDC, else build/test/shardc), and the `note` lines as comments after the header
    comment of that file. Returns shardc's exit code (0 on success)."""
    text = json.dumps(inventory, indent=1) + "\n"
    inventory_path.write_text(text)
    shardc = os.environ.get("SHARDC") or str(REPO / "build" / "test" / "shardc")
    code = subprocess.call([shardc, "import", str(inventory_path), "-o", str(model_path)])
    if code != 0:
        return code
    lines = model_path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    model_path.write_text("\n".join(lines[:at] + note + lines[at:]) + "\n")
    if len(text) > GZIP_ABOVE_BYTES:
        Path(f"{inventory_path}.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
        inventory_path.unlink()
    return 0
