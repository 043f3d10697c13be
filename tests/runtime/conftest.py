"""pytest set-up of the runtime tests (tests/runtime/README.md).

`--shardc=BIN` (or $SHARDC) names the shardc binary; without either the
repo's build/test/shardc is used, and a missing binary fails the tests (it is
never a skip). Write `--shardc=BIN` with `=` when pytest runs from this folder
without a path argument: a separate `BIN` is taken for a test path, which moves
pytest's rootdir away from pytest.ini. Tests that launch real processes carry
the `distributed` marker (`pytest -m "not distributed"` runs the single-process
ones only); it is registered here too, so a run from the repository root
(`pytest tests/runtime`, rootdir without pytest.ini) knows it.
"""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded at test time
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers",
                            "distributed: launches real gloo processes (8 at most)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shardc", default=os.environ.get("SHARDC"),
                     help="shardc binary (default: $SHARDC, else build/test/shardc)")


@pytest.fixture(scope="session")
def shardc(request: pytest.FixtureRequest) -> str:
    path = request.config.getoption("--shardc") or os.path.join(REPO, "build", "test", "shardc")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no shardc binary at {path}: build it, or pass --shardc BIN", pytrace=False)
    return os.path.abspath(str(path))
