"""Model-level torch.compile benchmark (issues 5, 15): training steps of a GPT-2,
a ResNet-18 and an MLP, compiled for tpu, side by side with tpu eager modes,
CPU PyTorch eager and CPU Inductor, and (GPT-2, MLP) JAX; prints JSON medians
and ratios.

    python bench/bench_models.py [--out bench_models.json] [--steps 3]
        [--rounds 3] [--warmup 2] [--only gpt2,resnet18,mlp] [--no-inductor]
        [--no-jax] [--cpu-threads N] [--pipelined] [--jax-without-ynn]

Workloads, each a full training step (forward, loss, backward, optimizer update):
1. ``gpt2``: ``transformers``' ``GPT2LMHeadModel``, random init, 4 layers,
   d_model 256, 4 heads, 512-token vocabulary (tied LM head), no dropout, on
   batches of 8 sequences of 64 random tokens, next-token cross-entropy, AdamW
   (lr 3e-4, weight decay 1e-2).
2. ``resnet18``: ``timm``'s ResNet-18, random init, 10 classes, train mode
   (batch-norm batch statistics), batch 8 of 3x64x64 float32 noise,
   cross-entropy, SGD with momentum 0.9.

3. ``mlp``: ``nn.Linear`` 1024 -> 1024 -> 1024 -> 10 with ReLU between, batch
   256 of float32 noise, cross-entropy, AdamW (lr 1e-3, weight decay 1e-2):
   issue 15's MLP, next to :class:`JaxMLPRun`, the same step in JAX.

Configurations, each with its own copy of the model (same initial weights from a
CPU seed) and the same cycle of 2 batches already on its device:
``cpu`` (PyTorch eager), ``cpu_inductor`` (``torch.compile(model)``, PyTorch's
default backend; ``--no-inductor`` leaves it out), ``tpu_strict``,
``tpu_fused`` (eager; the step is one program), ``tpu_compiled``
(``torch.compile(model, backend="tpu")``, the optimizer eager in strict mode)
and ``tpu_compiled_fused`` (the same with the caller in fused mode, so the
compiled graphs and the optimizer join one program per step). For ``gpt2``
(and ``mlp``) also ``jax``: the same model written in JAX (GPT-2 layout, tanh GELU, tied
head, torch's AdamW arithmetic), initialised from the CPU model's weights, the
whole step one ``jax.jit`` function with donated parameters and optimizer
state (``--no-jax``, or jax not installed, leaves it out). A step ends when its
work has finished (``torchtpu.sync()``, ``block_until_ready``); with
``--pipelined`` only the last step of each round waits, so the host side of
step k+1 overlaps step k's execution in every configuration that can overlap
(tpu fused: ``optimizer.step()`` flushes without waiting; JAX: asynchronous
dispatch; CPU eager cannot).

After ``--warmup`` untimed steps per configuration (they compile; their time is
``warmup_seconds``), ``--rounds`` rounds follow; in each every configuration
runs ``--steps`` timed steps in turn, so the load of a shared machine weighs on
all alike. Reported per workload: ``ms_per_step_median``, ``cpu_ms_per_step_median``
(process CPU time of all threads, less sensitive to a loaded machine than wall
time), ``page_faults_per_step_median`` (minor faults, ``getrusage``), ratios
of ``tpu_compiled`` to the others, ``tpu_fused_over_jax`` and
``tpu_compiled_fused_over_jax`` (issue 15's target: at most 1.05), the programs
run per tpu step, CPU fallbacks, and ``loss_max_rel_diff``: the largest
relative difference of a configuration's loss to ``cpu``'s, step by step (every
configuration runs the same batches in the same order; a wrong result shows
here).

Why JAX's MLP step is faster (issue 15): jaxlib's XLA:CPU runs the MLP's
forward and input-gradient dots through YNNPACK, while the xla-cpu-pjrt
plugin's XLA runs every dot through Eigen (it accepts the flag value ``dot``
but forms no YNN fusion). ``--jax-without-ynn`` turns YNN off for jaxlib, so
both run the same kind of dot (measured: JAX's donating MLP step 11.6-13.6
ms with YNN, 18.7-19.1 ms without; torchtpu's fused step 15-17.6 ms).

About 3.5 minutes on the 2-core CPU-plugin machine once the persistent caches
(torchtpu's and Inductor's) are warm, about 5 when cold (Inductor's first
compile of the two models takes about 2 minutes there). ``--cpu-threads``
sets ``torch.set_num_threads`` (CPU PyTorch and Inductor only; XLA's CPU
plugin and JAX keep their own thread pools). A benchmark, not a test: nothing
here asserts.
"""

import argparse
import math
import os
import resource
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torchtpu  # noqa: E402
from torchtpu.tools import timm_compat  # noqa: E402

from _report import emit  # noqa: E402

SEED = 0
BATCHES = 2
# --pipelined: steps do not wait for each other (one wait after each round's
# steps, for every configuration alike), as a training loop that reads no
# value per step runs: the host records / dispatches step k+1 while step k
# executes.
PIPELINED = False
GPT_VOCAB, GPT_D_MODEL, GPT_HEADS, GPT_LAYERS, GPT_SEQ, GPT_BATCH = 512, 256, 4, 4, 64, 8
GPT_LR, GPT_WEIGHT_DECAY = 3e-4, 1e-2
RESNET_BATCH, RESNET_SIZE, RESNET_CLASSES = 8, 64, 10
MLP_WIDTH, MLP_CLASSES, MLP_BATCH, MLP_LR, MLP_WEIGHT_DECAY = 1024, 10, 256, 1e-3, 1e-2


# ---- workloads: (CPU model, optimizer factory, CPU batches, loss(forward, batch))

def _gpt2_setup():
    import transformers

    transformers.utils.logging.set_verbosity_error()
    config = transformers.GPT2Config(
        vocab_size=GPT_VOCAB, n_positions=GPT_SEQ, n_embd=GPT_D_MODEL, n_layer=GPT_LAYERS,
        n_head=GPT_HEADS, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    g = torch.Generator().manual_seed(SEED)
    batches = [(torch.randint(0, GPT_VOCAB, (GPT_BATCH, GPT_SEQ + 1), generator=g),)
               for _ in range(BATCHES)]

    def loss_fn(forward, batch):
        (tokens,) = batch
        logits = forward(tokens[:, :-1]).logits
        return F.cross_entropy(logits.reshape(-1, GPT_VOCAB), tokens[:, 1:].reshape(-1))

    def make_opt(params):
        return torch.optim.AdamW(params, lr=GPT_LR, weight_decay=GPT_WEIGHT_DECAY)

    return model, make_opt, batches, loss_fn


def _cross_entropy_loss(forward, batch):
    x, y = batch
    return F.cross_entropy(forward(x), y)


def _resnet18_setup():
    timm = timm_compat.import_timm()
    model = timm.create_model("resnet18", pretrained=False, num_classes=RESNET_CLASSES)
    g = torch.Generator().manual_seed(SEED)
    batches = [(torch.randn(RESNET_BATCH, 3, RESNET_SIZE, RESNET_SIZE, generator=g),
                torch.randint(0, RESNET_CLASSES, (RESNET_BATCH,), generator=g))
               for _ in range(BATCHES)]

    def make_opt(params):
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)

    return model, make_opt, batches, _cross_entropy_loss


def _mlp_setup():
    model = torch.nn.Sequential(
        torch.nn.Linear(MLP_WIDTH, MLP_WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(MLP_WIDTH, MLP_WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(MLP_WIDTH, MLP_CLASSES))
    g = torch.Generator().manual_seed(SEED)
    batches = [(torch.randn(MLP_BATCH, MLP_WIDTH, generator=g),
                torch.randint(0, MLP_CLASSES, (MLP_BATCH,), generator=g))
               for _ in range(BATCHES)]

    def make_opt(params):
        return torch.optim.AdamW(params, lr=MLP_LR, weight_decay=MLP_WEIGHT_DECAY)

    return model, make_opt, batches, _cross_entropy_loss


WORKLOADS = {"gpt2": _gpt2_setup, "resnet18": _resnet18_setup, "mlp": _mlp_setup}


# ---- torch configurations

class TorchRun:
    """One torch configuration of a workload: model, optimizer, batches on
    ``device``, the eager mode its steps run in and how the model is compiled."""

    def __init__(self, workload, device, mode=None, backend=None):
        self.device, self.mode = torch.device(device), mode
        torch.manual_seed(SEED)  # the same initial weights for every configuration
        model, make_opt, batches, self.loss_fn = WORKLOADS[workload]()
        self.model = model.to(device)
        if hasattr(self.model, "tie_weights"):
            # Module.to makes new Parameters for a PrivateUse1 device, one per
            # module, which unties the LM head (pytorch/pytorch#116255).
            self.model.tie_weights()
        self.opt = make_opt(self.model.parameters())
        self.forward = torch.compile(self.model, backend=backend) if backend else self.model
        self.batches = [tuple(t.to(device) for t in b) for b in batches]
        self.losses = []  # of every step, device tensors

    def steps(self, n):
        previous = torchtpu.get_eager_mode()
        if self.mode is not None:
            torchtpu.set_eager_mode(self.mode)
        try:
            for _ in range(n):
                batch = self.batches[len(self.losses) % BATCHES]
                loss = self.loss_fn(self.forward, batch)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()  # fused: ends the step's graph (torchtpu/_step_flush.py)
                if self.device.type == "tpu" and not PIPELINED:
                    torchtpu.sync()
                self.losses.append(loss.detach())
            if self.device.type == "tpu" and PIPELINED:
                torchtpu.sync()
        finally:
            torchtpu.set_eager_mode(previous)

    def loss_values(self):
        return [v.item() for v in self.losses]


# ---- the JAX GPT-2

class JaxGPT2Run:
    """The ``gpt2`` workload in JAX: GPT-2's forward (as ``transformers``
    computes it: pre-norm blocks, fused QKV ``Conv1D`` weights stored
    ``[in, out]``, causal softmax attention scaled by 1/sqrt(head_dim), tanh
    GELU, LayerNorm eps 1e-5, LM head tied to the token embedding), mean
    next-token cross-entropy, and torch's AdamW update (decoupled decay, bias
    corrections), all in one jitted, donating step. Weights and batches are the
    CPU torch model's."""

    def __init__(self):
        import jax
        import jax.numpy as jnp

        self.jax, jnp_ = jax, jnp
        torch.manual_seed(SEED)
        model, _, batches, _ = _gpt2_setup()
        self.params = {name: jnp.asarray(p.detach().numpy())
                       for name, p in model.named_parameters()}  # the tied head once
        self.m = {k: jnp.zeros_like(v) for k, v in self.params.items()}
        self.v = {k: jnp.zeros_like(v) for k, v in self.params.items()}
        self.batches = [jnp.asarray(b[0].numpy()) for b in batches]
        self.losses = []  # of every step, jax arrays

        def layer_norm(x, w, b, eps=1e-5):
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            return (x - mean) / jnp_.sqrt(var + eps) * w + b

        def loss_fn(p, tokens):
            idx, target = tokens[:, :-1], tokens[:, 1:]
            b, s = idx.shape
            hd = GPT_D_MODEL // GPT_HEADS
            h = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:s]
            causal = jnp_.tril(jnp_.ones((s, s), dtype=bool))
            for i in range(GPT_LAYERS):
                pre = f"transformer.h.{i}."
                a = layer_norm(h, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"])
                qkv = a @ p[pre + "attn.c_attn.weight"] + p[pre + "attn.c_attn.bias"]
                q, k, v = (t.reshape(b, s, GPT_HEADS, hd).transpose(0, 2, 1, 3)
                           for t in jnp_.split(qkv, 3, axis=-1))
                scores = jnp_.where(causal, q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd),
                                    jnp_.finfo(h.dtype).min)
                att = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3)
                att = att.reshape(b, s, GPT_D_MODEL)
                h = h + att @ p[pre + "attn.c_proj.weight"] + p[pre + "attn.c_proj.bias"]
                m = layer_norm(h, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"])
                m = jax.nn.gelu(m @ p[pre + "mlp.c_fc.weight"] + p[pre + "mlp.c_fc.bias"],
                                approximate=True)
                h = h + m @ p[pre + "mlp.c_proj.weight"] + p[pre + "mlp.c_proj.bias"]
            h = layer_norm(h, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
            logits = h @ p["transformer.wte.weight"].T
            logp = jax.nn.log_softmax(logits, axis=-1)
            return -jnp_.take_along_axis(logp, target[..., None], axis=-1).mean()

        self._step = _jax_adamw_step(loss_fn, GPT_LR, GPT_WEIGHT_DECAY)

    def steps(self, n):
        for _ in range(n):
            tokens = self.batches[len(self.losses) % BATCHES]
            t = float(len(self.losses) + 1)  # AdamW's step count
            self.params, self.m, self.v, loss = self._step(self.params, self.m, self.v, t, tokens)
            self.losses.append(loss if PIPELINED else loss.block_until_ready())
        if PIPELINED:
            self.losses[-1].block_until_ready()

    def loss_values(self):
        return [float(v) for v in self.losses]


def _jax_adamw_step(loss_fn, lr, wd, b1=0.9, b2=0.999, eps=1e-8):
    """``step(p, m, v, t, batch) -> (p, m, v, loss)``: value_and_grad of
    ``loss_fn(p, batch)`` and torch's AdamW update (decoupled decay, bias
    corrections), one jitted function donating parameters and moments."""
    import jax
    import jax.numpy as jnp

    def step(p, m, v, t, batch):
        loss, g = jax.value_and_grad(loss_fn)(p, batch)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        m = jax.tree.map(lambda m_, g_: b1 * m_ + (1 - b1) * g_, m, g)
        v = jax.tree.map(lambda v_, g_: b2 * v_ + (1 - b2) * g_ * g_, v, g)
        p = jax.tree.map(
            lambda p_, m_, v_: p_ * (1 - lr * wd)
            - (lr / bc1) * m_ / (jnp.sqrt(v_) / jnp.sqrt(bc2) + eps), p, m, v)
        return p, m, v, loss

    return jax.jit(step, donate_argnums=(0, 1, 2))


class JaxMLPRun:
    """The ``mlp`` workload in JAX: ``x @ W.T + b`` per layer (torch's
    ``nn.Linear`` layout, so the same weights), ReLU between, mean
    cross-entropy, torch's AdamW, one jitted donating step. Weights and batches
    are the CPU torch model's. ``lowered_text()`` is the step's StableHLO, to
    compare with the program torchtpu emits for the same step."""

    def __init__(self):
        import jax
        import jax.numpy as jnp

        torch.manual_seed(SEED)
        model, _, batches, _ = _mlp_setup()
        self.params = {name: jnp.asarray(p.detach().numpy())
                       for name, p in model.named_parameters()}
        self.m = {k: jnp.zeros_like(v) for k, v in self.params.items()}
        self.v = {k: jnp.zeros_like(v) for k, v in self.params.items()}
        self.batches = [(jnp.asarray(x.numpy()), jnp.asarray(y.numpy())) for x, y in batches]
        self.losses = []
        names = [n.rsplit(".", 1)[0] for n, _ in model.named_parameters()][::2]

        def loss_fn(p, batch):
            h, y = batch
            for i, layer in enumerate(names):
                h = h @ p[layer + ".weight"].T + p[layer + ".bias"]
                if i + 1 < len(names):
                    h = jax.nn.relu(h)
            logp = jax.nn.log_softmax(h, axis=-1)
            return -jnp.take_along_axis(logp, y[:, None], axis=-1).mean()

        self._step = _jax_adamw_step(loss_fn, MLP_LR, MLP_WEIGHT_DECAY)

    def steps(self, n):
        for _ in range(n):
            batch = self.batches[len(self.losses) % BATCHES]
            t = float(len(self.losses) + 1)
            self.params, self.m, self.v, loss = self._step(self.params, self.m, self.v, t, batch)
            self.losses.append(loss if PIPELINED else loss.block_until_ready())
        if PIPELINED:
            self.losses[-1].block_until_ready()

    def lowered_text(self):
        return self._step.lower(self.params, self.m, self.v, 1.0, self.batches[0]).as_text()

    def loss_values(self):
        return [float(v) for v in self.losses]


JAX_RUNS = {"gpt2": JaxGPT2Run, "mlp": JaxMLPRun}


def _jax_available():
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def _max_rel_diff(values, reference):
    return max(abs(a - b) / abs(b) for a, b in zip(values, reference, strict=True))


def bench_workload(name, args):
    """Times ``name`` in every configuration; see the module doc for the fields."""
    notes = []
    makers = {"cpu": lambda: TorchRun(name, "cpu")}
    if args.inductor:
        makers["cpu_inductor"] = lambda: TorchRun(name, "cpu", backend="inductor")
    makers.update({
        "tpu_strict": lambda: TorchRun(name, "tpu", "strict"),
        "tpu_fused": lambda: TorchRun(name, "tpu", "fused"),
        "tpu_compiled": lambda: TorchRun(name, "tpu", "strict", backend="tpu"),
        "tpu_compiled_fused": lambda: TorchRun(name, "tpu", "fused", backend="tpu"),
    })
    if name in JAX_RUNS and args.jax:
        if _jax_available():
            makers["jax"] = JAX_RUNS[name]
        else:
            notes.append("jax not installed: no jax configuration")
    runs, warmup_seconds, fallbacks = {}, {}, {}
    for config, make in makers.items():
        torchtpu.metrics.reset()
        start = time.perf_counter()
        try:
            runs[config] = make()
            runs[config].steps(args.warmup)
        except Exception as e:  # a benchmark reports a configuration that fails
            runs.pop(config, None)
            notes.append(f"{config} failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        warmup_seconds[config] = time.perf_counter() - start
        if config.startswith("tpu"):
            fallbacks[config] = torchtpu.metrics.fallback_counts()
    times = {config: [] for config in runs}
    programs, faults = {}, {config: [] for config in runs}
    cpu_ms = {config: [] for config in runs}  # process CPU time: all threads' work
    for _ in range(args.rounds):
        for config, run in runs.items():
            before = torchtpu.metrics.metrics()["executes"]
            usage = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            run.steps(args.steps)
            times[config].append((time.perf_counter() - start) / args.steps * 1e3)
            after = resource.getrusage(resource.RUSAGE_SELF)
            faults[config].append((after.ru_minflt - usage.ru_minflt) / args.steps)
            cpu_ms[config].append((after.ru_utime + after.ru_stime - usage.ru_utime
                                   - usage.ru_stime) / args.steps * 1e3)
            if config.startswith("tpu"):
                programs[config] = (torchtpu.metrics.metrics()["executes"] - before) / args.steps
    med = {config: statistics.median(v) for config, v in times.items()}
    ratios = {}
    if "tpu_compiled" in med:
        for other in med:
            if other != "tpu_compiled":
                ratios[f"tpu_compiled_over_{other}"] = med["tpu_compiled"] / med[other]
    if "jax" in med:  # issue 15's target: at most 1.05
        for config in ("tpu_fused", "tpu_compiled_fused"):
            if config in med:
                ratios[f"{config}_over_jax"] = med[config] / med["jax"]
    if "tpu_compiled_fused" in med and "tpu_fused" in med:
        ratios["tpu_compiled_fused_over_tpu_fused"] = med["tpu_compiled_fused"] / med["tpu_fused"]
    ref = runs["cpu"].loss_values()
    return {
        "ms_per_step_median": med,
        "ratios": ratios,
        "programs_per_step": programs,
        "cpu_ms_per_step_median": {c: statistics.median(v) for c, v in cpu_ms.items()},
        "page_faults_per_step_median": {c: statistics.median(v) for c, v in faults.items()},
        "warmup_seconds": warmup_seconds,
        "fallbacks": fallbacks,
        "loss_max_rel_diff": {config: _max_rel_diff(run.loss_values(), ref)
                              for config, run in runs.items() if config != "cpu"},
        "notes": notes,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--steps", type=int, default=3, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2, help="untimed steps (they compile)")
    p.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    p.add_argument("--no-inductor", dest="inductor", action="store_false",
                   help="leave out cpu_inductor (its first compile takes minutes)")
    p.add_argument("--no-jax", dest="jax", action="store_false", help="leave out jax")
    p.add_argument("--cpu-threads", type=int, default=None,
                   help="torch.set_num_threads (default: PyTorch's choice)")
    p.add_argument("--pipelined", action="store_true",
                   help="no wait between the steps of a round (every configuration)")
    p.add_argument("--jax-without-ynn", action="store_true",
                   help="XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type= for the "
                        "process: jaxlib's dots on Eigen, as xla-cpu-pjrt's are")
    args = p.parse_args(argv)
    if args.jax_without_ynn:
        # Read by jaxlib and by the plugin when each first compiles (both
        # after this); the plugin forms no YNN fusions either way.
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_experimental_ynn_fusion_type=").strip()
    global PIPELINED
    PIPELINED = args.pipelined
    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    result = {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    for name in args.only.split(","):
        result[name] = bench_workload(name, args)
    result["args"] = vars(args)
    return emit(result, args.out)


if __name__ == "__main__":
    main()
