"""User kernels (issue 13): JAX functions and StableHLO text as tpu ops, in the
eager modes and under torch.compile, with autograd through the JAX VJP.

The proof model is a transformers Llama (tiny config, random weights) whose
RMSNorm and attention are replaced by JAX kernels: logits and gradients match
the unmodified model on tpu within 1e-5, and in fused mode the training step
is still one program.
"""

import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import torchtpu  # noqa: E402
from _util import fresh_dynamo, no_fallback  # noqa: E402,F401  (fresh Dynamo per test)

jax = pytest.importorskip("jax", reason="JAX kernels need jax")
jnp = jax.numpy


def _rms_norm(x, w, eps):
    x32 = x.astype(jnp.float32)
    v = jnp.mean(x32 * x32, axis=-1, keepdims=True)
    return w * (x32 * jax.lax.rsqrt(v + eps)).astype(x.dtype)


rms_norm = torchtpu.jax_kernel(_rms_norm, name="rms_norm")


def torch_rms_norm(x, w, eps):
    x32 = x.float()
    v = x32.pow(2).mean(-1, keepdim=True)
    return w * (x32 * torch.rsqrt(v + eps)).to(x.dtype)


@torchtpu.jax_kernel
def attention(q, k, v, mask, n_rep, scaling):
    """q [b, h, s, d], k/v [b, kv_h, s, d], additive mask [b, 1, s, s] ->
    [b, s, h, d] (transformers' eager attention, softmax in float32)."""
    k = jnp.repeat(k, n_rep, axis=1)
    v = jnp.repeat(v, n_rep, axis=1)
    w = jnp.einsum("bhqd,bhkd->bhqk", q, k) * scaling + mask
    w = jax.nn.softmax(w.astype(jnp.float32), axis=-1).astype(q.dtype)
    return jnp.einsum("bhqk,bhkd->bqhd", w, v)


def tpu(x):
    return x.detach().to("tpu").requires_grad_(x.requires_grad)


# ---------------------------------------------------------------- JAX RMSNorm


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_jax_rms_norm_forward_backward(mode):
    torchtpu.set_eager_mode(mode)
    x = torch.randn(3, 5, 16, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    xt, wt = tpu(x), tpu(w)
    with no_fallback():
        y = rms_norm(xt, wt, 1e-6)
        (y * y).sum().backward()
    ref = torch_rms_norm(x, w, 1e-6)
    (ref * ref).sum().backward()
    torch.testing.assert_close(y.cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xt.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(wt.grad.cpu(), w.grad, rtol=1e-5, atol=1e-5)
    # and against jax.grad of the same function on JAX's own CPU backend
    gx, gw = jax.grad(lambda a, b: jnp.sum(_rms_norm(a, b, 1e-6) ** 2), argnums=(0, 1))(
        x.detach().numpy(), w.detach().numpy())
    torch.testing.assert_close(xt.grad.cpu(), torch.tensor(gx.tolist()), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(wt.grad.cpu(), torch.tensor(gw.tolist()), rtol=1e-5, atol=1e-5)


def test_fused_kernel_joins_its_neighbours():
    torchtpu.set_eager_mode("fused")
    x, w = torch.randn(4, 8).to("tpu"), torch.randn(8).to("tpu")
    torchtpu.sync()
    torchtpu.metrics.reset()
    y = rms_norm(x * 2, w, 1e-5).exp().sum()
    y.item()
    m = torchtpu.metrics.metrics()
    assert m["fused_flushes"] == 1 and m["executes"] == 1, m
    torch.testing.assert_close(y.cpu(), torch_rms_norm(x.cpu() * 2, w.cpu(), 1e-5).exp().sum())


def test_strided_input_and_tuple_outputs():
    @torchtpu.jax_kernel
    def two(a, b):
        return a + b, (a * b).sum(axis=0)

    a = torch.randn(6, 4).to("tpu").t()  # a transposed view
    b = torch.randn(4, 6).to("tpu")
    s, p = two(a, b)
    torch.testing.assert_close(s.cpu(), a.cpu() + b.cpu())
    torch.testing.assert_close(p.cpu(), (a.cpu() * b.cpu()).sum(0))


def test_integer_arguments_and_double_backward():
    @torchtpu.jax_kernel
    def take(x, idx):
        return x[idx] * 2, idx + 1

    x = torch.randn(5, device="tpu", requires_grad=True)
    idx = torch.tensor([0, 3, 3], device="tpu", dtype=torch.int32)
    y, j = take(x, idx)
    y.sum().backward()  # no gradient for idx; the int output gets a float0 cotangent
    assert x.grad.cpu().tolist() == [2.0, 0.0, 0.0, 4.0, 0.0]
    assert j.cpu().tolist() == [1, 4, 4]

    @torchtpu.jax_kernel
    def cube(x):
        return x ** 3

    x = torch.tensor([1.0, 2.0], device="tpu", requires_grad=True)
    g, = torch.autograd.grad(cube(x).sum(), x, create_graph=True)  # the VJP is a kernel too
    gg, = torch.autograd.grad(g.sum(), x)
    assert g.detach().cpu().tolist() == [3.0, 12.0] and gg.cpu().tolist() == [6.0, 12.0]


def test_jax_kernel_under_compile_no_graph_break():
    lin = torch.nn.Linear(16, 16).to("tpu")
    w = torch.randn(16).to("tpu").requires_grad_()

    def step(x):
        return rms_norm(lin(x), w, 1e-6).square().mean()

    x = torch.randn(4, 16).to("tpu")
    loss = torch.compile(step, backend="tpu")(x)
    loss.backward()
    counters = torch._dynamo.utils.counters
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    g_compiled = w.grad.cpu()
    w.grad = None
    ref = torch_rms_norm(lin(x), w, 1e-6).square().mean()
    ref.backward()
    torch.testing.assert_close(loss.cpu(), ref.detach().cpu(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g_compiled, w.grad.cpu(), rtol=1e-5, atol=1e-6)


@torchtpu.jax_kernel
def _scale(x, k):
    return x * k


@torchtpu.jax_kernel
def _sum(x, axes):
    return jnp.sum(x, axis=axes)


def test_static_number_passed_into_compiled_function():
    # Dynamo makes a float argument (and an int whose value changes) a
    # symbolic graph input; as a kernel's static argument it must become a
    # constant with a guard: one graph per value, fullgraph, right results.
    f = torch.compile(lambda x, k: _scale(x, k) + 1, backend="tpu", fullgraph=True)
    x = torch.arange(3.0).to("tpu")
    for k in (2.0, 3.0, 2, 5):
        torch.testing.assert_close(f(x, k).cpu(), torch.arange(3.0) * k + 1)
    # Ints inside a tuple (axes) turn symbolic the same way once they change.
    g = torch.compile(lambda x, ax: _sum(x, ax) + 0, backend="tpu", fullgraph=True)
    x = torch.arange(24.0).reshape(2, 3, 4)
    for ax in [(0, 2), (1, 2), [0, 1]]:
        torch.testing.assert_close(g(x.to("tpu"), ax).cpu(), x.sum(tuple(ax)))


@torchtpu.jax_kernel
def _axpy(a, k, b, *, c, s=1.0):
    return a * k + b - c * s


def test_tensor_keyword_arguments():
    # A tensor passed by keyword is a kernel input (with a gradient), not a
    # static value; eager and under torch.compile (fullgraph).
    a, b, c = (torch.randn(3) for _ in range(3))
    ta, tc = a.to("tpu").requires_grad_(), c.to("tpu").requires_grad_()
    out = _axpy(ta, 2.0, b.to("tpu"), c=tc, s=3.0)
    torch.testing.assert_close(out.cpu(), a * 2 + b - c * 3)
    out.sum().backward()
    torch.testing.assert_close(ta.grad.cpu(), torch.full((3,), 2.0))
    torch.testing.assert_close(tc.grad.cpu(), torch.full((3,), -3.0))
    f = torch.compile(lambda a, b, c: _axpy(a, 2.0, b=b, c=c), backend="tpu", fullgraph=True)
    torch.testing.assert_close(f(a.to("tpu"), b.to("tpu"), c.to("tpu")).cpu(), a * 2 + b - c)


def test_array_as_static_argument_raises():
    np = pytest.importorskip("numpy")

    # The kernel key holds repr() of the statics, which elides the middle of
    # a large array: two arrays differing there would share one kernel.
    z = np.zeros(2000, "float32")
    x = torch.zeros(1).to("tpu")
    with pytest.raises(TypeError, match="kernel '_axpy': argument 1 is or holds an array"):
        _axpy(x, z, x, c=x)
    with pytest.raises(TypeError, match="keyword argument 's' is or holds an array"):
        _axpy(x, 1.0, x, c=x, s=(1.0, x))
    assert _axpy(x, np.float32(2.0), x, c=x, s=(1.0,)[0]).cpu().item() == 0.0


def test_pickle_kernels():
    import pickle

    # A decorated module-level kernel pickles by reference; one made from a
    # function under another name by value; a StableHLO op by its text.
    assert pickle.loads(pickle.dumps(_scale)) is _scale
    again = pickle.loads(pickle.dumps(rms_norm))
    x, w = torch.randn(2, 8), torch.randn(8)
    torch.testing.assert_close(again(x.to("tpu"), w.to("tpu"), 1e-6).cpu(),
                               torch_rms_norm(x, w, 1e-6))
    neg = torchtpu.stablehlo_op("""func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.negate %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}""", name="neg")
    # Loading registers the text again (what a fresh process does; here the
    # registry already has it, so it maps to the same program).
    loaded = pickle.loads(pickle.dumps(neg))
    assert loaded is not neg and loaded.key == neg.key
    assert loaded(torch.arange(3.0).to("tpu")).cpu().tolist() == [-0.0, -1.0, -2.0]


# ---------------------------------------------------------------- Llama


def _llama(attn):
    transformers = pytest.importorskip("transformers")
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    from transformers.models.llama import modeling_llama

    def jax_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
        assert attention_mask is not None and dropout == 0.0
        return attention(query, key, value, attention_mask, module.num_key_value_groups,
                         scaling), None

    AttentionInterface.register("torchtpu_jax", jax_attention)
    AttentionMaskInterface.register("torchtpu_jax", eager_mask)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=128, attn_implementation=attn)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    if attn == "torchtpu_jax":
        for m in model.modules():
            if isinstance(m, modeling_llama.LlamaRMSNorm):
                m.forward = lambda h, m=m: rms_norm(h, m.weight, m.variance_epsilon)
    return model.to("tpu")


def _step(model, ids):
    logits = model(ids).logits
    logits.float().square().mean().backward()
    return logits


def test_llama_with_jax_rmsnorm_and_attention_matches():
    torchtpu.set_eager_mode("fused")
    ids = torch.randint(0, 128, (2, 12)).to("tpu")
    ref, mine = _llama("eager"), _llama("torchtpu_jax")
    ref_logits = _step(ref, ids).detach().cpu()
    for i in range(3):  # the first two compile (the first has no .grad yet)
        mine.zero_grad()
        torchtpu.sync()
        if i == 2:
            torchtpu.metrics.reset()
        logits = _step(mine, ids)  # held: the flush makes it an output each time
        torchtpu.sync()
    m = torchtpu.metrics.metrics()
    assert m["executes"] == 1 and m["compiles"] == 0, m  # the step is one program
    assert torchtpu.metrics.total_fallbacks() == 0
    torch.testing.assert_close(logits.detach().cpu(), ref_logits, rtol=1e-5, atol=1e-5)
    for (name, p), (_, q) in zip(mine.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-5, atol=1e-5, msg=name)


# ---------------------------------------------------------------- StableHLO


ROUND_BF16 = """
module @round {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.reduce_precision %x, format = e8m7 : tensor<8xf32>
    %1 = call @twice(%0) : (tensor<8xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
  func.func private @twice(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.add %x, %x : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""


def test_stablehlo_op_eager_and_compile():
    op = torchtpu.stablehlo_op(ROUND_BF16, ((8,), torch.float32), name="round_bf16")
    x = torch.randn(8) * 100
    want = x.to(torch.bfloat16).float() * 2
    with no_fallback():
        got = op(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    f = torch.compile(lambda t: op(t * 1.0) + 1, backend="tpu")
    torch.testing.assert_close(f(x.to("tpu")).cpu(), want + 1, rtol=0, atol=0)
    assert not torch._dynamo.utils.counters["graph_break"]


def test_stablehlo_op_from_jax_export():
    # jax.export's text carries debug locations (#loc aliases around the module)
    exported = jax.export.export(jax.jit(lambda x: jnp.sin(x) * 2))(
        jax.ShapeDtypeStruct((4,), jnp.float32))
    op = torchtpu.stablehlo_op(exported.mlir_module(), name="exported_sin")
    x = torch.randn(4)
    torch.testing.assert_close(op(x.to("tpu")).cpu(), torch.sin(x) * 2)


def test_stablehlo_op_with_vjp():
    square = torchtpu.stablehlo_op(
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {\n"
        "  %0 = stablehlo.multiply %x, %x : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}",
        name="square",
        vjp=torchtpu.stablehlo_op(
            "func.func @main(%x: tensor<3xf32>, %g: tensor<3xf32>) -> tensor<3xf32> {\n"
            "  %0 = stablehlo.multiply %x, %g : tensor<3xf32>\n"
            "  %1 = stablehlo.add %0, %0 : tensor<3xf32>\n  return %1 : tensor<3xf32>\n}",
            name="square_vjp"))
    x = torch.tensor([1.0, -2.0, 3.0], device="tpu", requires_grad=True)
    square(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.tensor([2.0, -4.0, 6.0]))


# ---------------------------------------------------------------- errors


def test_value_dependent_shape_raises_naming_kernel():
    @torchtpu.jax_kernel
    def positives(x):
        return x[x > 0]

    with pytest.raises(RuntimeError, match="kernel 'test_value_dependent.*positives'"):
        positives(torch.randn(5).to("tpu"))


def test_wrong_argument_dtype_or_device():
    op = torchtpu.stablehlo_op(ROUND_BF16, name="round_bf16")
    with pytest.raises(TypeError, match="kernel 'round_bf16': argument 0 has dtype Double"):
        op(torch.randn(8, dtype=torch.float64).to("tpu"))
    with pytest.raises(ValueError, match="kernel 'round_bf16': argument 0 has shape"):
        op(torch.randn(9).to("tpu"))
    with pytest.raises(TypeError, match="kernel 'round_bf16': argument 0 must be a tpu tensor"):
        op(torch.randn(8))
    with pytest.raises(TypeError, match="kernel 'rms_norm'.*jax_enable_x64"):
        rms_norm(torch.randn(2, 4, dtype=torch.float64).to("tpu"),
                 torch.randn(4, dtype=torch.float64).to("tpu"), 1e-6)


def test_bad_stablehlo_raises_naming_kernel():
    with pytest.raises(RuntimeError, match="kernel 'broken'.*unbalanced"):
        torchtpu.stablehlo_op("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {",
                              name="broken")
    with pytest.raises(RuntimeError, match="kernel 'typo'.*rejected"):
        torchtpu.stablehlo_op("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                              "  %0 = stablehlo.no_such_op %x : tensor<2xf32>\n"
                              "  return %0 : tensor<2xf32>\n}", name="typo")
    with pytest.raises(RuntimeError, match="kernel 'mismatch'.*rejected"):
        torchtpu.stablehlo_op("func.func @main(%x: tensor<2xf32>) -> tensor<3xf32> {\n"
                              "  return %x : tensor<2xf32>\n}", name="mismatch")
    # A custom call to a target the plugin does not register (untyped and FFI
    # APIs), and a JAX kernel whose lowering calls LAPACK (jaxlib registers
    # those targets in its own client, not in the PJRT plugin).
    for api in ("", "api_version = 4 : i32"):
        with pytest.raises(RuntimeError, match="kernel 'cc'.*rejected.*no_such_target"):
            torchtpu.stablehlo_op("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                                  "  %0 = stablehlo.custom_call @no_such_target(%x) {" + api +
                                  "} : (tensor<2xf32>) -> tensor<2xf32>\n"
                                  "  return %0 : tensor<2xf32>\n}", name="cc")
    chol = torchtpu.jax_kernel(jnp.linalg.cholesky, name="chol")
    with pytest.raises(RuntimeError, match="kernel 'chol'.*lapack_spotrf"):
        chol(torch.eye(3).to("tpu"))
    with pytest.raises(ValueError, match="kernel 'outs': out_types"):
        torchtpu.stablehlo_op(ROUND_BF16, ((8,), torch.float16), name="outs")
    # the process is fine afterwards
    assert (torch.ones(2, device="tpu") + 1).sum().item() == 4


def test_import_without_jax():
    # One subprocess (each costs ~10 s here): a finder makes JAX absent and
    # records every attempt to import it. Importing torchtpu works and tries
    # nothing; jax_kernel raises ImportError naming the package.
    code = ("import sys\n"
            "tried = []\n"
            "class NoJax:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('jax', 'jaxlib'):\n"
            "            tried.append(name); raise ImportError('no ' + name)\n"
            "sys.meta_path.insert(0, NoJax())\n"
            "import torchtpu\n"
            "assert not tried and 'jax' not in sys.modules, tried\n"
            "try:\n    torchtpu.jax_kernel(lambda x: x)\n"
            "except ImportError as e:\n    assert \"'jax'\" in str(e), e; print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
