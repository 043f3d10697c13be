"""pytest set-up of the PyTorch agreement suite (tests/torch/README.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def shardc() -> str:
    """The shardc binary: $SHARDC_BIN (CTest passes it), else build/test/shardc."""
    path = os.environ.get("SHARDC_BIN") or str(REPO / "build" / "test" / "shardc")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no shardc binary at {path}: build it (tools/test) or set SHARDC_BIN")
    return path
