"""The runtime-verification tests need an interpreter with torch (the checkout's .venv in CI)."""
import importlib.util

import pytest
from verify_helpers import VENV_PYTHON


@pytest.fixture(scope="session", autouse=True)
def _torch_available():
    if not VENV_PYTHON.exists() and importlib.util.find_spec("torch") is None:
        pytest.skip("runtime verification tests need an interpreter with torch")
