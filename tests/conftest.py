import os

import pytest

# The tests prove behaviour on the CPU PJRT plugin with one device unless a test
# asks for more.
os.environ.setdefault("TORCHTPU_CPU_DEVICES", "1")

import torch  # noqa: E402

import torchtpu  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _strict_mode_and_seed():
    torchtpu.set_eager_mode("strict")
    torch.manual_seed(0)
    yield
    torchtpu.set_eager_mode("strict")
