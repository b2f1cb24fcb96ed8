"""The runtime-verification tests need an interpreter with torch (the checkout's .venv in CI)."""
import importlib.util

import pytest
from verify_helpers import VENV_PYTHON


@pytest.fixture(scope="session", autouse=True)
def _torch_available():
    # torch is a test dependency: without it these tests fail (saying how to install it) rather
    # than skip, so a run without torch cannot look like a pass of runtime verification.
    if not VENV_PYTHON.exists() and importlib.util.find_spec("torch") is None:
        pytest.fail("runtime verification tests need an interpreter with torch: "
                    "pip install -e '.[test]' (CPU torch==2.13.0)", pytrace=False)
