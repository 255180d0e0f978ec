"""Fused mode's recompile guard: a line that keeps producing new graphs warns
(naming the line and what changed), TORCHTPU_RECOMPILE=error raises, and a loop
whose values (not structure) change compiles each graph once and never warns."""

import inspect
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torchtpu
from _util import no_fallback


@pytest.fixture
def fused(monkeypatch):
    monkeypatch.setattr(torchtpu.config, "recompile_warn_threshold", 2)
    monkeypatch.setattr(torchtpu.config, "recompile", "warn")
    torchtpu.set_eager_mode("fused")
    torchtpu.metrics.reset()
    yield
    torchtpu.set_eager_mode("strict")


def recompile_warnings(caught):
    return [w for w in caught if issubclass(w.category, torchtpu.RecompileWarning)]


def test_changing_batch_shape_warns_naming_the_line_and_shape(fused):
    model = torch.nn.Linear(8, 4).to("tpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in range(1, 6):
            start = inspect.currentframe().f_lineno + 1
            x = torch.randn(batch, 8, device="tpu")  # the first op of each graph
            model(x).relu().sum().item()
    found = recompile_warnings(caught)
    # Graphs 1 and 2 are within the threshold; 3, 4 and 5 warn.
    assert len(found) == 3, [str(w.message) for w in found]
    for w in found:
        assert w.filename == __file__ and w.lineno == start
        message = str(w.message)
        assert f"{os.path.basename(__file__)}:{start}" in message
        assert "shape:" in message
    assert "f32[5,8] here, f32[4,8] in the earlier graph" in str(found[-1].message)
    assert torchtpu.metrics.recompile_counts()[f"{__file__}:{start}"] == 5


def test_a_library_line_warns_once_at_the_callers_line(fused, tmp_path, monkeypatch):
    # Graphs starting in an installed package (transformers' masking code
    # during generate) are reported where the user's code calls it, once.
    (tmp_path / "growing_lib.py").write_text(
        "import torch\n"
        "def step(n):\n"
        "    x = torch.ones(n, 8, device='tpu')\n"
        "    return (x * 2).sum().item()\n")
    from torchtpu import _recompile

    monkeypatch.setattr(_recompile, "_SITE", (str(tmp_path) + os.sep,))
    monkeypatch.setattr(_recompile, "_warned_library_calls", set())
    monkeypatch.syspath_prepend(str(tmp_path))
    import growing_lib

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 7):
            line = inspect.currentframe().f_lineno + 1
            growing_lib.step(n)
    found = recompile_warnings(caught)
    assert len(found) == 1, [str(w.message) for w in found]
    assert found[0].filename == __file__ and found[0].lineno == line
    assert "growing_lib.py:3" in str(found[0].message)
    assert "installed package" in str(found[0].message)


def test_changing_dtype_is_named(fused):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            x = torch.ones(4, 4, device="tpu", dtype=dtype)
            (x * 2).sum().item()
    found = recompile_warnings(caught)
    assert len(found) == 1
    assert "dtype:" in str(found[0].message)


def test_error_mode_raises_a_runtime_error(tmp_path):
    script = tmp_path / "storm.py"
    script.write_text(textwrap.dedent("""
        import torch, torchtpu
        torchtpu.set_eager_mode("fused")
        assert torchtpu.config.recompile == "error"
        assert torchtpu.config.recompile_warn_threshold == 1
        for batch in range(1, 4):
            x = torch.randn(batch, 8, device="tpu")
            try:
                y = x.sum()
                y.item()
            except torchtpu.RecompileError as e:
                assert isinstance(e, RuntimeError)
                print("raised at batch", batch, "|", e)
                break
        else:
            raise SystemExit("no RecompileError")
        # The refused graph's values are not silently garbage: they raise.
        try:
            y.item()
        except RuntimeError as e:
            print("read after:", e)
    """))
    env = dict(os.environ, TORCHTPU_RECOMPILE="error", TORCHTPU_RECOMPILE_WARN="1")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "raised at batch 2 |" in out.stdout
    assert f"{script}:7" in out.stdout and "shape:" in out.stdout
    assert "read after:" in out.stdout and "was not compiled" in out.stdout


def test_config_reads_the_environment():
    code = ("import torchtpu; c = torchtpu.config; "
            "print(c.recompile_warn_threshold, c.recompile)")
    env = dict(os.environ)
    env.pop("TORCHTPU_RECOMPILE_WARN", None)
    env.pop("TORCHTPU_RECOMPILE", None)

    def run(**overrides):
        return subprocess.run([sys.executable, "-c", code], env={**env, **overrides},
                              capture_output=True, text=True, timeout=300)

    assert run().stdout.split() == ["8", "warn"]
    assert run(TORCHTPU_RECOMPILE_WARN="3", TORCHTPU_RECOMPILE="error").stdout.split() == [
        "3", "error"]
    bad = run(TORCHTPU_RECOMPILE="raise")
    assert bad.returncode != 0 and "TORCHTPU_RECOMPILE='raise' is not valid" in bad.stderr


def test_values_changing_never_recompile_or_warn(fused):
    torch.manual_seed(0)
    # Sizes no other test uses, so these graphs are new to the process's cache.
    model = torch.nn.Sequential(torch.nn.Linear(8, 20), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(20, 5)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    misses = []
    with warnings.catch_warnings(record=True) as caught, no_fallback():
        warnings.simplefilter("always")
        for step in range(10):
            for g in opt.param_groups:
                g["lr"] = 1e-2 / (step + 1)  # a new learning rate every step
            x = torch.randn(32, 8, device="tpu")  # new batch contents and RNG draws
            y = torch.randint(0, 5, (32,), device="tpu")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
            misses.append(torchtpu.metrics.metrics()["cache_misses"])
    assert not recompile_warnings(caught), [str(w.message) for w in caught]
    counts = torchtpu.metrics.recompile_counts()
    # Every program compiled is a distinct fused graph, counted once at its
    # start line; the first steps differ (AdamW creates its state), later ones
    # only hit the cache.
    assert misses[-1] == sum(counts.values()) > 0, (misses, counts)
    assert misses[-1] == misses[3], misses
    assert max(counts.values()) <= torchtpu.config.recompile_warn_threshold, counts


def test_a_warning_hook_may_free_a_tensor_of_the_graph(fused, monkeypatch):
    # The warning runs Python in the middle of a flush; a tensor whose value
    # the graph computes may die there (here: freed by the hook itself).
    monkeypatch.setattr(torchtpu.config, "recompile_warn_threshold", 0)
    kept = {}
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda *args, **kwargs: kept.clear()
        x = torch.arange(100.0, device="tpu")
        kept["doomed"] = x * 3
        assert (x * 2).sum().item() == 9900.0
    assert not kept


def test_compiled_graph_recompiles_name_the_compiled_function(monkeypatch, request):
    monkeypatch.setattr(torchtpu.config, "recompile_warn_threshold", 2)
    monkeypatch.setattr(torchtpu.config, "recompile", "warn")
    # (config.patch, not monkeypatch: monkeypatch's undo left dynamo's config
    # without the key, and a later torch.compile in the process failed)
    patch = torch._dynamo.config.patch(automatic_dynamic_shapes=False)
    patch.__enter__()
    request.addfinalizer(lambda: patch.__exit__(None, None, None))
    torch._dynamo.reset()

    def fn(x):
        return (x * 2).sin()  # the graph's user code

    cf = torch.compile(fn, backend="tpu")
    line = inspect.getsourcelines(fn)[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 5):
            cf(torch.randn(n, device="tpu"))
    found = recompile_warnings(caught)
    assert len(found) == 2, [str(w.message) for w in found]
    for w in found:
        message = str(w.message)
        assert os.path.basename(__file__) in message and "eval_with_key" not in message
        assert f":{line}" in message or f":{line + 1}" in message, message
    torch._dynamo.reset()
