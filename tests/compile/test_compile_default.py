"""torch.compile(model) with no backend: graphs with tpu tensors go to the "tpu"
backend (never to Inductor's tpu code path, which imports another project's
torch_tpu), other graphs to Inductor; mode= and fullgraph= are accepted."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchtpu
from _util import no_fallback
from _util import fresh_dynamo  # noqa: F401  (autouse: a fresh Dynamo per test)
from torchtpu import _compile_default



def test_default_backend_is_torchtpus():
    assert torch.compiler.get_default_backend() is _compile_default.default_backend


@pytest.mark.parametrize("kwargs", [{}, {"fullgraph": True}, {"mode": "reduce-overhead"},
                                    {"mode": "max-autotune", "fullgraph": True},
                                    {"mode": "default", "dynamic": False}])
def test_model_on_tpu_runs_as_one_tpu_program(kwargs):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to("tpu")
    x = torch.randn(5, 8, device="tpu")
    expected = m(x).cpu()
    cm = torch.compile(m, **kwargs)
    with no_fallback():
        cm(x)
        torchtpu.sync()
        before = torchtpu.metrics.metrics()["executes"]
        out = cm(x)
        torchtpu.sync()
        assert torchtpu.metrics.metrics()["executes"] - before == 1  # a replay
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), expected)
    assert not torch._dynamo.utils.counters["inductor"], "a tpu graph reached Inductor"


def test_training_step_matches_eager():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).to("tpu")
    ref = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).to("tpu")
    ref.load_state_dict(m.state_dict())
    x = torch.randn(6, 8, device="tpu")
    y = torch.tensor([0, 1, 2, 0, 1, 2], device="tpu")
    cm = torch.compile(m)
    with no_fallback():
        for _model, fwd in ((m, cm), (ref, ref)):
            F.cross_entropy(fwd(x), y).backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu())


def test_graph_mixing_cpu_and_tpu_tensors():
    def f(a, b, c):
        return (a + b.to("tpu")) * c.sum().to("tpu"), b * 2

    a = torch.randn(4, device="tpu")
    b, c = torch.randn(4), torch.randn(3)
    out, cpu_out = torch.compile(f)(a, b, c)
    e_out, e_cpu = f(a, b, c)
    assert out.device.type == "tpu" and cpu_out.device.type == "cpu"
    torch.testing.assert_close(out.cpu(), e_out.cpu())
    torch.testing.assert_close(cpu_out, e_cpu)


def test_graph_that_creates_tpu_tensors_without_tpu_inputs():
    # Dynamo's fake-tensor path asks torch.tpu.is_initialized() for a factory
    # on tpu; found only through the values the graph computes.
    def make():
        return torch.ones(3, device="tpu") * 2

    def add(x):
        return x + torch.arange(3.0, device="tpu")

    with no_fallback():
        out = torch.compile(make)()
        added = torch.compile(add)(torch.ones(3, device="tpu"))
    assert out.device.type == "tpu" and out.cpu().tolist() == [2.0, 2.0, 2.0]
    assert added.cpu().tolist() == [1.0, 2.0, 3.0]


def test_cpu_graph_still_goes_to_inductor():
    def f(x):
        return torch.sin(x) * 2

    x = torch.randn(8)
    out = torch.compile(f)(x)
    torch.testing.assert_close(out, f(x))
    assert torch._dynamo.utils.counters["inductor"], "the CPU graph did not reach Inductor"


def test_backend_tpu_takes_mode_without_warning(caplog):
    m = nn.Linear(4, 4).to("tpu")
    x = torch.randn(2, 4, device="tpu")
    out = torch.compile(m, backend="tpu", mode="max-autotune")(x)
    torch.testing.assert_close(out.cpu(), m(x).cpu())
    assert "ignoring extra kwargs" not in caplog.text


def run_python(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, timeout=300,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_default_set_when_dynamo_loads_after_torchtpu():
    out = run_python("""
        import sys, torch, torchtpu
        assert "torch._dynamo" not in sys.modules  # import torch stays light
        m = torch.nn.Linear(4, 2).to("tpu")
        y = torch.compile(m)(torch.randn(3, 4, device="tpu"))
        from torchtpu._compile_default import default_backend
        print(torch.compiler.get_default_backend() is default_backend, y.device)
    """)
    assert out.split() == ["True", "tpu:0"]


def test_a_users_own_default_is_kept():
    out = run_python("""
        import os
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch, torch._dynamo
        torch.compiler.set_default_backend("eager")
        import torchtpu
        print(torch.compiler.get_default_backend())
    """)
    assert out.split() == ["eager"]


@pytest.mark.parametrize("order", ["torchtpu_first", "dynamo_first", "dynamo_initialized_first"])
def test_dynamo_device_interface_is_torchtpus(order):
    # Whichever loads first, Dynamo's "tpu" interface answers from torch.tpu
    # (torch 2.13's own, for another project, raises for device_count).
    first = {"torchtpu_first": "",
             "dynamo_first": "import torch._dynamo",
             "dynamo_initialized_first": "import torch._dynamo.device_interface as d; "
                                         "d.get_interface_for_device('cpu')"}[order]
    out = run_python(f"""
        import os
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch
        {first}
        import torchtpu
        from torch._dynamo.device_interface import get_interface_for_device
        iface = get_interface_for_device("tpu")
        print(iface.__module__, iface.device_count(), iface.current_device(),
              iface.is_dtype_supported(torch.float64))
    """)
    assert out.split() == ["torchtpu._dynamo_device", "1", "0", "True"]


@pytest.mark.parametrize("order", ["torchtpu_first", "dynamo_first"])
def test_torch_tpu_device_functions_trace_like_torch_cuda(order):
    # torch.tpu.synchronize/current_stream/device_count/is_available/current_device
    # inside a compiled function: one graph, no break, no warning (Dynamo knew
    # only torch.cuda's by name and broke the graph at torchtpu._C builtins),
    # and the synchronize still waits between the two programs around it.
    first = {"torchtpu_first": "", "dynamo_first": "import torch._dynamo"}[order]
    out = run_python(f"""
        import os, warnings
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch
        {first}
        import torchtpu
        import torch._dynamo

        def f(x):
            y = x * 2
            torch.tpu.synchronize()
            s = torch.tpu.current_stream()
            n = torch.tpu.device_count() + torch.tpu.current_device()
            return y + n if torch.tpu.is_available() else y

        x = torch.arange(4.0, device="tpu")
        explained = torch._dynamo.explain(f)(x)
        torch._dynamo.reset()
        waits = []  # the graph's streams::synchronize_device op calls this
        wait = torch.accelerator.synchronize
        torch.accelerator.synchronize = lambda d=None: (waits.append(str(d)), wait(d))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = torch.compile(f, backend="tpu")(x)
        print(explained.graph_count, explained.graph_break_count, len(caught),
              y.cpu().tolist() == [1.0, 3.0, 5.0, 7.0], waits)
    """)
    assert out.split() == ["1", "0", "0", "True", "['tpu:0']"]
