import atexit
import os
import shutil
import tempfile

import pytest

# The tests prove behaviour on the CPU PJRT plugin with one device unless a test
# asks for more.
os.environ.setdefault("TORCHTPU_CPU_DEVICES", "1")
# The persistent compile cache goes to a per-session temp dir (removed at exit),
# never to the user's ~/.cache; tests that need their own dir set it themselves.
if "TORCHTPU_CACHE_DIR" not in os.environ:
    os.environ["TORCHTPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchtpu-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TORCHTPU_CACHE_DIR"], ignore_errors=True)

# The fused-mode pass (TORCHTPU_TEST_MODE=fused) is there to prove fused
# graphs: a test line that loops over shapes must not stop fusing (the storm
# detector, torchtpu.config.fused_storm_threshold; its own tests set it).
if os.environ.get("TORCHTPU_TEST_MODE") == "fused":
    os.environ.setdefault("TORCHTPU_FUSED_STORM", "none")

import torch  # noqa: E402

import torchtpu  # noqa: E402,F401
from _util import TEST_MODE  # noqa: E402




@pytest.fixture(autouse=True)
def _eager_mode_and_seed():
    torchtpu.set_eager_mode(TEST_MODE)
    torch.manual_seed(0)
    yield
    try:
        # An error still pending (a deferred check, a failed fused graph) belongs
        # to this test: it fails here, not inside the next test that syncs.
        torchtpu.sync()
    except Exception as error:  # noqa: BLE001  (any pending error fails the test)
        pytest.fail(f"the test left an error pending, raised at teardown's sync: "
                    f"{type(error).__name__}: {error}", pytrace=False)
    finally:
        torchtpu.set_eager_mode("strict")


@pytest.fixture(scope="module")
def gpt2():
    """A transformers GPT-2 with a small random config (2 layers, d 64, 128-token
    vocabulary; seed 0) in eval mode on CPU, and a (1, 5) prompt of token ids."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128,
                                     n_positions=64)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(1, 128, (1, 5))
    return model, ids
