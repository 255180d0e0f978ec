"""Decode throughput of a transformers Llama with greedy ``generate`` (issue 34):
CPU PyTorch, tpu strict / fused / ``torch.compile`` (dynamic and static KV
cache), and the same model's decode loop written in JAX, jitted, its KV cache
donated (the XLA limit). Prints a table and JSON.

    python bench/bench_decode.py [--new-tokens 64] [--batches 8,1] [--rounds 3]
        [--configs cpu,tpu_strict,...] [--large | --only-large] [--quick] [--cold]
        [--no-diagnose] [--cpu-threads N] [--out bench_decode.json]
    python bench/bench_decode.py --program-vs-jax [--batches 8,1]

``--program-vs-jax`` measures only the captured decode program against the
JAX step in one process (:func:`program_vs_jax`).

Model: ``LlamaForCausalLM(LlamaConfig(...))``, random init (seed 0), float32,
SDPA attention: ``small`` (default) 6 layers, hidden 512, 8 query / 4 KV
heads (head_dim 64), MLP 1408, vocabulary 8000; ``--large`` adds ``large``:
12 layers, hidden 1024, 16 / 8 heads, MLP 2816 (slow on a 2-core machine).
Workload: a prompt of 32 random tokens (seed 1) per row, ``generate(
max_new_tokens=N, do_sample=False)`` with the model's own EOS (2), so
transformers' EOS stopping criterion (``torch.isin``) runs as it would for a
real model. Batch 8 and batch 1.

Configurations, each in its own process (``--worker``), kept alive across
rounds; the parent sends each a "run" in turn, round after round, so the load
of a shared machine falls on all alike:

- ``cpu``: CPU PyTorch eager, dynamic cache; ``cpu1``: the same on one
  thread (``torch.set_num_threads(1)``). On a loaded 2-core machine
  PyTorch's two OpenMP threads wait at every parallel region for a thread
  the OS has descheduled: ``cpu`` slows down many times over under load,
  ``cpu1`` and XLA's thread pools much less;
- ``tpu_strict``, ``tpu_fused``: tpu eager modes, dynamic cache;
- ``tpu_fused_static``: fused, ``cache_implementation="static"``;
- ``tpu_compile``, ``tpu_compile_static``: ``model.forward =
  torch.compile(model.forward, backend="tpu")`` (caller in strict mode),
  dynamic cache / static cache. ``disable_compile=True`` in every tpu
  configuration: transformers would otherwise compile the forward itself with
  ``backend="inductor"`` whenever the cache is static and the device is "tpu";
- ``jax``: the same Llama written in ``jax.numpy`` below (:class:`JaxLlama`),
  the CPU model's weights, one jitted prefill and one jitted decode step per
  token (KV cache ``donate_argnums``, position a traced scalar, the next token
  chosen on device: no host read until the end), greedy;
- ``jax_read``: the same, reading each new token to the host before the next
  step, as ``generate``'s stop check does (``unfinished_sequences.max() ==
  0`` every token): what the per-token read costs JAX, so the tpu rows
  can be set against a loop of the same shape.

Fields per configuration and batch (``results[model][batch][config]``):

- ``tokens_per_s``: ``batch * N`` over the median wall seconds of a warm
  ``generate`` call (prefill included; the tokens read back as ``.cpu()``);
- ``decode_ms``: median wall ms per decode step (the interval between
  consecutive calls of a pass-through LogitsProcessor: one loop iteration of
  ``generate``, which reads the host every token, so the interval is the step);
  JAX: (call - prefill) / (N - 1);
- ``first_call_s``: the first ``generate`` in the process (compiles, or loads
  from the persistent cache: ``--cold`` gives every process an empty cache
  dir), with ``first_compiles`` and ``first_persistent_hits``;
- ``equal_cpu``: tokens identical to ``cpu``'s (``first_diff``: first
  differing new-token index when not);
- per decode step, from ``torchtpu.metrics`` snapshots taken by the same
  LogitsProcessor (medians over steps 2..N, so prefill is out):
  ``executes_per_step`` (programs run), ``compiles_per_step``,
  ``host_bytes_per_step`` / ``device_bytes_per_step`` (bytes copied
  device-to-host / host-to-device), ``donated_bytes_per_step`` (fused: buffers
  reused in place), ``alloc_bytes_per_step`` (bytes of new tpu storages
  allocated: a static cache rewritten as new buffers shows here);
- ``kv_cache_bytes``: K and V of every layer at the cache's final length
  (static: ``max_cache_len = 32 + N``);
- ``decode_compiles``: compiles during a warm call (new lengths);
- with diagnosis (default; ``--no-diagnose`` leaves it out): one more call
  under ``torch.profiler`` (tpu rows): ``host_reads_per_token`` (``Memcpy
  DtoH`` events / N), ``d2d_copies_per_token``, ``programs_per_token`` by
  name (top 8), and, for the eager modes, ``host_read_sources``: which
  Python line asked for each read (a TorchDispatchMode logging
  ``_local_scalar_dense`` and tpu-to-CPU copies, innermost transformers or
  torch frame); under ``torch.compile``: ``graphs_per_forward``,
  ``forward_host_ms`` (host ms of the compiled forward per decode step),
  ``replay_host_ms`` (of the backend's graph calls in it), ``captures`` and
  ``raw_execute_ms`` (the decode program's PJRT execute alone);
- ``peak_rss_mb`` (``ru_maxrss``) and ``peak_device_mb``
  (``torch.tpu.max_memory_allocated``: live tpu storages, not XLA scratch).

Steps 2..N of decode have a growing length with a dynamic cache; strict and
fused mode compile per length on a cold call (``first_compiles``). A benchmark:
nothing asserts. Compile and execute counts do not depend on the machine's
load; seconds do: compare ratios from one run.
"""

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from _report import emit  # noqa: E402

PROMPT = 32
MODELS = {
    "small": dict(num_hidden_layers=6, hidden_size=512, num_attention_heads=8,
                  num_key_value_heads=4, intermediate_size=1408, vocab_size=8000),
    "tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,  # tests only
                 num_key_value_heads=2, intermediate_size=128, vocab_size=256),
    "large": dict(num_hidden_layers=12, hidden_size=1024, num_attention_heads=16,
                  num_key_value_heads=8, intermediate_size=2816, vocab_size=8000),
}
CONFIGS = ["cpu", "cpu1", "tpu_strict", "tpu_fused", "tpu_fused_static", "tpu_compile",
           "tpu_compile_static", "jax", "jax_read"]
MARK = "@@bench_decode "  # prefix of the worker's result lines on stdout


# ---- the torch side (worker process)

def _llama(model_name):
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(max_position_embeddings=1024, **MODELS[model_name])
    return transformers.LlamaForCausalLM(config).eval()


def _prompt(batch, vocab):
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randint(3, vocab, (batch, PROMPT), generator=g)


class _StepClock:
    """A pass-through LogitsProcessor: called once per generate step (prefill
    included) with no device work; records wall time and, on tpu, counters."""

    def __init__(self, tpu):
        self.tpu, self.marks = tpu, []

    def __call__(self, input_ids, scores):
        mark = {"t": time.perf_counter()}
        if self.tpu:
            import torch
            import torchtpu

            m = torchtpu.metrics.metrics()
            stats = torch.tpu.memory_stats()
            mark.update(executes=m["executes"], compiles=m["compiles"],
                        host_bytes=m["bytes_to_host"], device_bytes=m["bytes_to_device"],
                        donated_bytes=m["donated_bytes"],
                        alloc_bytes=stats["allocated_bytes.all.allocated"])
        self.marks.append(mark)
        return scores

    def per_step(self, key):
        """Median over decode steps 2..N of the per-step change of ``key``."""
        deltas = [b[key] - a[key] for a, b in zip(self.marks[1:], self.marks[2:])]
        return statistics.median(deltas) if deltas else None


class TorchWorker:
    def __init__(self, config, model_name, batch, new_tokens):
        import torch

        self.torch, self.config, self.new_tokens = torch, config, new_tokens
        self.tpu = config.startswith("tpu")
        if config == "cpu1":
            torch.set_num_threads(1)
        model = _llama(model_name)
        self.vocab = model.config.vocab_size
        ids = _prompt(batch, self.vocab)
        self.kw = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        if config.endswith("_static"):
            self.kw["cache_implementation"] = "static"
        if self.tpu:
            import torchtpu

            self.torchtpu = torchtpu
            model = model.to("tpu")
            ids = ids.to("tpu")
            torchtpu.set_eager_mode("fused" if config.startswith("tpu_fused") else "strict")
            if config.startswith("tpu_compile"):
                model.forward = self._timed(torch.compile(model.forward, backend="tpu"))
            self.kw["disable_compile"] = True  # see the module doc
        self.model, self.ids = model, ids
        self.kw["attention_mask"] = torch.ones_like(ids)

    def _timed(self, compiled):
        """``compiled`` wrapped to record the host seconds of each call, and
        the backend's graphs (torchtpu._dynamo.FusedGraph) patched to record
        theirs and their last arguments: the replay cost per step, apart
        from Dynamo's guards and AOTAutograd's wrapper."""
        from torchtpu import _dynamo

        self.forward_s, self.graph_s, self.graph_args = [], [], {}
        graph_call = _dynamo.FusedGraph.__call__

        def timed_graph(graph, args):
            start = time.perf_counter()
            out = graph_call(graph, args)
            self.graph_s.append(time.perf_counter() - start)
            self.graph_args[id(graph)] = (graph, list(args))
            return out

        _dynamo.FusedGraph.__call__ = timed_graph

        # wraps: generate reads forward's signature to choose its inputs
        @functools.wraps(compiled)
        def forward(*args, **kwargs):
            start = time.perf_counter()
            out = compiled(*args, **kwargs)
            self.forward_s.append(time.perf_counter() - start)
            return out

        return forward

    def generate(self, clock=None):
        from transformers import LogitsProcessorList

        kw = dict(self.kw)
        if clock is not None:
            kw["logits_processor"] = LogitsProcessorList([clock])
        with self.torch.no_grad():
            return self.model.generate(self.ids, **kw).cpu()

    def ping(self):
        return {}

    def first(self):
        if self.tpu:
            self.torchtpu.metrics.reset()
        start = time.perf_counter()
        out = self.generate()
        result = {"first_call_s": time.perf_counter() - start,
                  "tokens": out[:, PROMPT:].tolist()}
        if self.tpu:
            m = self.torchtpu.metrics.metrics()
            result.update(first_compiles=m["compiles"], first_persistent_hits=m["persistent_hits"])
        return result

    def run(self):
        clock = _StepClock(self.tpu)
        if self.tpu:
            self.torchtpu.metrics.reset()
        compiled = self.config.startswith("tpu_compile")
        if compiled:
            self.forward_s.clear()
            self.graph_s.clear()
        start = time.perf_counter()
        self.generate(clock)
        seconds = time.perf_counter() - start
        steps = [b["t"] - a["t"] for a, b in zip(clock.marks[1:], clock.marks[2:])]
        result = {"seconds": seconds, "decode_ms": statistics.median(steps) * 1e3}
        if compiled:  # decode steps only: the first call is the prefill
            n = len(self.forward_s)
            result["graphs_per_forward"] = len(self.graph_s) / n
            result["forward_host_ms"] = statistics.median(self.forward_s[1:]) * 1e3
            per_graph = len(self.graph_s) // n
            result["replay_host_ms"] = statistics.median(
                sum(self.graph_s[i:i + per_graph]) for i in range(per_graph, len(self.graph_s),
                                                                  per_graph)) * 1e3
        if self.tpu:
            result["decode_compiles"] = self.torchtpu.metrics.metrics()["compiles"]
            for key in ("executes", "compiles", "host_bytes", "device_bytes", "donated_bytes",
                        "alloc_bytes"):
                result[key + "_per_step"] = clock.per_step(key)
        return result

    def diagnose(self):
        """One call under torch.profiler (program names, host reads, device
        copies) and, in eager modes, one under a dispatch mode naming the
        Python line of every host read."""
        if not self.tpu:
            return {}
        from collections import Counter

        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            self.generate()
        names = Counter(e.name for e in prof.events())
        n = self.new_tokens
        programs = {k[len("XLA program: "):]: v / n for k, v in names.items()
                    if k.startswith("XLA program: ")}
        top = dict(sorted(programs.items(), key=lambda kv: -kv[1])[:8])
        result = {
            "host_reads_per_token": sum(v for k, v in names.items() if "Memcpy DtoH" in k) / n,
            "d2d_copies_per_token": sum(v for k, v in names.items() if "Memcpy DtoD" in k) / n,
            "programs_per_token": sum(programs.values()),
            "top_programs_per_token": top,
            "kv_cache_bytes": self._kv_cache_bytes(),
        }
        if self.config.startswith("tpu_compile"):
            # Not under a dispatch mode: Dynamo runs the forward eagerly then.
            result.update(self._replay_cost())
        else:
            reads, copies = self._read_sources()
            result["host_read_sources"] = reads
            result["d2d_copy_bytes_per_token"] = copies
        return result

    def _replay_cost(self):
        """The decode graph (the one with most captured inputs among those
        called last) replayed and executed raw, 10 times each, ms per call:
        ``replay_ms`` (``_C._compiled_replay`` back to back, then a sync) and
        ``raw_execute_ms`` (``_C._compiled_raw_execute_ns``: the same
        program's PJRT executes alone). Replaying a step again rewrites the
        same cache positions with the same values."""
        from torchtpu import _C, _dynamo

        graph, args = list(self.graph_args.values())[-1]
        captures = graph.all_captures()
        if not captures:
            return {"replay_note": "decode graph not captured"}
        # As FusedGraph.__call__ does: views of growing storages copied whole.
        args = [_dynamo._whole_storage(a) if i in graph.tpu_inputs else a
                for i, a in enumerate(args)]
        tensors = [args[i] for i in graph.tpu_inputs]
        n, result = 10, {"captured_inputs": len(tensors), "captures": len(captures)}
        self.torchtpu.sync()
        try:
            for c in reversed(captures):  # the one made for these inputs' layout
                try:
                    result["raw_execute_ms"] = _C._compiled_raw_execute_ns(c, tensors, n) / 1e6
                    break
                except RuntimeError:
                    continue
            enqueue = []
            for _ in range(5):  # one replay on an idle device: host seconds to enqueue it
                start = time.perf_counter()
                if _C._compiled_replay(captures, tensors) is None:
                    raise RuntimeError("no capture matches the last call's inputs")
                enqueue.append(time.perf_counter() - start)
                self.torchtpu.sync()
            result["replay_enqueue_ms"] = statistics.median(enqueue) * 1e3
            start = time.perf_counter()
            for _ in range(n):
                _C._compiled_replay(captures, tensors)
            self.torchtpu.sync()
            result["replay_ms"] = (time.perf_counter() - start) / n * 1e3
        except Exception as e:  # a replayed step's own checks may fail
            result["replay_note"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return result

    def _kv_cache_bytes(self):
        """K and V of every layer at the final length, 32 + N - 1 (the last
        token is never fed back; a static cache is that long too), float32."""
        c = self.model.config
        head_dim = c.hidden_size // c.num_attention_heads
        return (2 * c.num_hidden_layers * self.ids.shape[0] * c.num_key_value_heads
                * (PROMPT + self.new_tokens - 1) * head_dim * 4)

    def _read_sources(self):
        """{"file:line (function)": reads per token} for host reads the
        dispatcher sees (``.item()``/``bool()`` and tpu->cpu copies)."""
        import traceback
        from collections import Counter

        from torch.utils._python_dispatch import TorchDispatchMode

        torch = self.torch
        ops = {torch.ops.aten._local_scalar_dense.default}
        copies = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}
        sources, copy_bytes = Counter(), 0

        def where():
            frames = [f for f in traceback.extract_stack()[:-3]
                      if "transformers" in f.filename or "bench_decode" in f.filename]
            if not frames:
                return "?"
            f = frames[-1]
            return f"{f.filename.split('site-packages/')[-1]}:{f.lineno} ({f.line.strip()[:60]})"

        class Reads(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func in ops:
                    sources[where()] += 1
                elif func in copies:
                    src = args[1] if func is torch.ops.aten.copy_.default else args[0]
                    dst_cpu = (args[0].device.type == "cpu"
                               if func is torch.ops.aten.copy_.default
                               else str(kwargs.get("device", "")) == "cpu")
                    if isinstance(src, torch.Tensor) and src.device.type == "tpu" and dst_cpu:
                        sources[where()] += 1
                    elif (func is torch.ops.aten.copy_.default and src.device.type == "tpu"
                          and args[0].device.type == "tpu"):
                        nonlocal copy_bytes
                        copy_bytes += args[0].numel() * args[0].element_size()
                return func(*args, **kwargs)

        with Reads():
            self.generate()
        return ({k: v / self.new_tokens for k, v in sources.most_common(10)},
                copy_bytes / self.new_tokens)

    def peak(self):
        result = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        if self.tpu:
            result["peak_device_mb"] = self.torch.tpu.max_memory_allocated() / 2**20
        return result


# ---- the JAX Llama

class JaxLlama:
    """transformers' Llama forward in ``jax.numpy``, the CPU model's weights:
    RMSNorm in float32 (``x * rsqrt(mean(x^2) + eps) * w``), rotary embedding
    as ``rotate_half`` (inv_freq = 1 / theta^(2i/head_dim), cos/sin of the
    position), grouped-query attention (KV heads repeated), scale
    1/sqrt(head_dim), SiLU-gated MLP, untied LM head; ``nn.Linear`` weights
    kept ``[out, in]`` (``x @ W.T``). The KV cache is one ``[B, KV, L, D]``
    array per layer and K/V, L = 32 + N, written with
    ``lax.dynamic_update_slice``; the decode step donates it."""

    def __init__(self, model_name, batch, new_tokens, read_each_step=False):
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp, self.new_tokens = jax, jnp, new_tokens
        model = _llama(model_name)
        c = model.config
        self.layers, self.heads, self.kv_heads = (c.num_hidden_layers, c.num_attention_heads,
                                                  c.num_key_value_heads)
        self.head_dim = c.hidden_size // c.num_attention_heads
        self.eps, theta = c.rms_norm_eps, c.rope_parameters["rope_theta"]
        self.p = {k: jnp.asarray(v.detach().numpy()) for k, v in model.state_dict().items()}
        self.inv_freq = 1.0 / theta ** (jnp.arange(0, self.head_dim, 2, dtype=jnp.float32)
                                        / self.head_dim)
        self.ids = jnp.asarray(_prompt(batch, c.vocab_size).numpy())
        self.batch, self.max_len = batch, PROMPT + new_tokens
        self.read_each_step = read_each_step
        self._prefill = jax.jit(self._forward_prefill, donate_argnums=(1,))
        self._step = jax.jit(self._forward_step, donate_argnums=(1,))

    def _rms(self, x, w):
        x32 = x.astype(self.jnp.float32)
        return w * (x32 * self.jax.lax.rsqrt((x32 * x32).mean(-1, keepdims=True) + self.eps))

    def _rope(self, x, pos):  # x [B, H, S, D], pos [S]
        jnp = self.jnp
        freqs = pos[:, None].astype(jnp.float32) * self.inv_freq[None, :]
        emb = jnp.concatenate([freqs, freqs], axis=-1)
        half = self.head_dim // 2
        rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * jnp.cos(emb) + rotated * jnp.sin(emb)

    def _forward(self, p, cache, ids, start):
        """Logits of the last position and the cache with positions
        [start, start + S) written; ``ids`` [B, S], ``start`` a traced int."""
        jax, jnp = self.jax, self.jnp
        b, s = ids.shape
        pos = start + jnp.arange(s)
        keys = jnp.arange(self.max_len)
        mask = keys[None, :] <= pos[:, None]  # [S, L]: causal over the whole cache
        h = p["model.embed_tokens.weight"][ids]
        new_cache = []
        for i in range(self.layers):
            pre = f"model.layers.{i}."
            x = self._rms(h, p[pre + "input_layernorm.weight"])

            def heads(w, n, x=x):
                return (x @ p[w].T).reshape(b, s, n, self.head_dim).transpose(0, 2, 1, 3)

            q = self._rope(heads(pre + "self_attn.q_proj.weight", self.heads), pos)
            k = self._rope(heads(pre + "self_attn.k_proj.weight", self.kv_heads), pos)
            v = heads(pre + "self_attn.v_proj.weight", self.kv_heads)
            ck, cv = cache[i]
            ck = jax.lax.dynamic_update_slice(ck, k, (0, 0, start, 0))
            cv = jax.lax.dynamic_update_slice(cv, v, (0, 0, start, 0))
            new_cache.append((ck, cv))
            rep = self.heads // self.kv_heads
            kk, vv = jnp.repeat(ck, rep, axis=1), jnp.repeat(cv, rep, axis=1)
            scores = (q @ kk.transpose(0, 1, 3, 2)) / jnp.sqrt(jnp.float32(self.head_dim))
            scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
            att = jax.nn.softmax(scores, axis=-1) @ vv
            att = att.transpose(0, 2, 1, 3).reshape(b, s, self.heads * self.head_dim)
            h = h + att @ p[pre + "self_attn.o_proj.weight"].T
            x = self._rms(h, p[pre + "post_attention_layernorm.weight"])
            gate = jax.nn.silu(x @ p[pre + "mlp.gate_proj.weight"].T)
            up = x @ p[pre + "mlp.up_proj.weight"].T
            h = h + (gate * up) @ p[pre + "mlp.down_proj.weight"].T
        h = self._rms(h[:, -1], p["model.norm.weight"])
        return h @ p["lm_head.weight"].T, new_cache

    def _forward_prefill(self, p, cache, ids):
        logits, cache = self._forward(p, cache, ids, 0)
        return cache, jnp_argmax(self.jnp, logits)

    def _forward_step(self, p, cache, token, start):
        logits, cache = self._forward(p, cache, token[:, None], start)
        return cache, jnp_argmax(self.jnp, logits)

    def _empty_cache(self):
        shape = (self.batch, self.kv_heads, self.max_len, self.head_dim)
        return [(self.jnp.zeros(shape, self.jnp.float32), self.jnp.zeros(shape, self.jnp.float32))
                for _ in range(self.layers)]

    def generate(self):
        """(new tokens [B, N] as a list, seconds of the prefill, seconds in all)."""
        import numpy as np

        start = time.perf_counter()
        cache, token = self._prefill(self.p, self._empty_cache(), self.ids)
        token.block_until_ready()
        prefill = time.perf_counter() - start
        tokens = [token]
        for i in range(1, self.new_tokens):
            cache, token = self._step(self.p, cache, token, PROMPT + i - 1)
            if self.read_each_step:
                bool(np.asarray(token).max() == 2)  # the stop check's read (EOS 2)
            tokens.append(token)
        out = np.stack([np.asarray(t) for t in tokens], axis=1)
        return out.tolist(), prefill, time.perf_counter() - start

    def ping(self):
        return {}

    def first(self):
        start = time.perf_counter()
        tokens, _, _ = self.generate()
        return {"first_call_s": time.perf_counter() - start, "tokens": tokens}

    def run(self):
        _, prefill, seconds = self.generate()
        return {"seconds": seconds,
                "decode_ms": (seconds - prefill) / max(1, self.new_tokens - 1) * 1e3}

    def diagnose(self):
        return {"kv_cache_bytes": 2 * self.layers * self.batch * self.kv_heads * self.max_len
                * self.head_dim * 4}

    def peak(self):
        return {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def jnp_argmax(jnp, logits):
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def program_vs_jax(model_name, batch, new_tokens, rounds=7, n=10):
    """The decode program ``torch.compile`` captures with a static cache,
    executed raw (``_C._compiled_raw_execute_ns``, ``n`` back to back), against
    ``n`` JAX decode steps back to back, interleaved ``rounds`` times in this
    one process: the model's own math, apart from everything around it.
    Returns medians in ms and their ratio."""
    from torchtpu import _C

    worker = TorchWorker("tpu_compile_static", model_name, batch, new_tokens)
    worker.first()
    worker.run()
    graph, args = list(worker.graph_args.values())[-1]
    capture = graph.all_captures()[-1]
    tensors = [args[i] for i in graph.tpu_inputs]
    jax_model = JaxLlama(model_name, batch, new_tokens)
    cache, token = jax_model._prefill(jax_model.p, jax_model._empty_cache(), jax_model.ids)

    def jax_steps():
        nonlocal cache, token
        start = time.perf_counter()
        for _ in range(n):
            cache, token = jax_model._step(jax_model.p, cache, token, PROMPT + new_tokens // 2)
        token.block_until_ready()
        return (time.perf_counter() - start) / n * 1e3

    jax_steps()  # compiles
    raw, jax_ms = [], []
    for _ in range(rounds):
        raw.append(_C._compiled_raw_execute_ns(capture, tensors, n) / 1e6)
        jax_ms.append(jax_steps())
    raw_ms, step_ms = statistics.median(raw), statistics.median(jax_ms)
    return {"captured_program_ms": raw_ms, "jax_step_ms": step_ms,
            "program_over_jax": raw_ms / step_ms}


def worker_main(args):
    """Answers the parent's commands on stdin, one JSON line each on stdout."""
    import warnings

    warnings.filterwarnings("ignore")
    if args.cpu_threads:
        import torch

        torch.set_num_threads(args.cpu_threads)
    if args.worker in ("jax", "jax_read"):
        w = JaxLlama(args.model, args.batch, args.new_tokens,
                     read_each_step=args.worker == "jax_read")
    else:
        w = TorchWorker(args.worker, args.model, args.batch, args.new_tokens)
    for line in sys.stdin:
        cmd = line.strip()
        try:
            result = getattr(w, cmd)()
        except Exception as e:  # a benchmark reports a configuration that fails
            result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        print(MARK + json.dumps(result), flush=True)
        if cmd == "peak":
            return


# ---- the parent

class Worker:
    """One configuration's process; ``ask(cmd)`` sends a command, returns its JSON."""

    def __init__(self, config, model, batch, args, cache_dir):
        env = dict(os.environ)
        if cache_dir is not None:
            env["TORCHTPU_CACHE_DIR"] = cache_dir
        self.log = tempfile.TemporaryFile(mode="w+")  # the worker's stderr, for errors
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", config, "--model", model,
             "--batch", str(batch), "--new-tokens", str(args.new_tokens)]
            + (["--cpu-threads", str(args.cpu_threads)] if args.cpu_threads else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True, env=env)

    def ask(self, cmd):
        try:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # exited: the error is read below
        for line in self.proc.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
        self.log.seek(0)
        tail = self.log.read()[-300:]
        return {"error": f"worker exited with {self.proc.wait()}: {tail}"}


def bench_one(model, batch, args):
    """{config: fields} for one model and batch (see the module doc)."""
    tmp = tempfile.TemporaryDirectory() if args.cold else None
    workers, results = {}, {}
    for config in args.configs:  # imports and model builds overlap
        cache_dir = os.path.join(tmp.name, config) if tmp else None
        workers[config] = Worker(config, model, batch, args, cache_dir)
    for config in args.configs:
        workers[config].ask("ping")  # every worker set up before any first call
    for config in args.configs:
        results[config] = workers[config].ask("first")  # one at a time: compiles don't overlap
        print(f"  {model} b{batch} {config}: first call "
              f"{results[config].get('first_call_s', float('nan')):.1f} s", file=sys.stderr)
    live = [c for c in args.configs if "error" not in results[c]]
    runs = {c: [] for c in live}
    for _ in range(args.rounds):
        for config in live:
            runs[config].append(workers[config].ask("run"))
    for config in args.configs:
        r = results[config]
        if config in live:
            good = [x for x in runs[config] if "error" not in x]
            if good:
                last = good[-1]
                r.update({k: v for k, v in last.items() if k not in ("seconds", "decode_ms")})
                sec = statistics.median(x["seconds"] for x in good)
                r["call_s"] = sec
                r["tokens_per_s"] = batch * args.new_tokens / sec
                r["decode_ms"] = statistics.median(x["decode_ms"] for x in good)
            else:
                r["error"] = runs[config][0]["error"]
            if args.diagnose:
                r.update(workers[config].ask("diagnose"))
        r.update(workers[config].ask("peak"))
        workers[config].proc.wait(timeout=60)
    ref = results.get("cpu", {}).get("tokens")
    for _config, r in results.items():
        tokens = r.pop("tokens", None)
        if ref is not None and tokens is not None:
            r["equal_cpu"] = tokens == ref
            if tokens != ref:
                r["first_diff"] = next(i for i in range(len(ref[0]))
                                       if [row[i] for row in tokens] != [row[i] for row in ref])
    if "cpu" in results and "tokens_per_s" in results["cpu"]:
        for r in results.values():
            if "tokens_per_s" in r:
                r["tokens_per_s_over_cpu"] = r["tokens_per_s"] / results["cpu"]["tokens_per_s"]
    if "jax" in results and "decode_ms" in results["jax"]:
        for r in results.values():
            if "decode_ms" in r:
                r["decode_ms_over_jax"] = r["decode_ms"] / results["jax"]["decode_ms"]
    if tmp:
        tmp.cleanup()
    return results


def print_table(report):
    from rich.console import Console
    from rich.table import Table

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    console = Console(stderr=True, width=200)
    for model, by_batch in report["results"].items():
        for batch, results in by_batch.items():
            t = Table(title=f"{model} Llama, batch {batch}, {report['args']['new_tokens']} new "
                            f"tokens ({report['date']})")
            for col in ("config", "tok/s", "x cpu", "decode ms", "x jax", "first s",
                        "compiles 1st", "progs/tok", "reads/tok", "host B/step",
                        "alloc MB/step", "KV MB", "peak MB", "= cpu"):
                t.add_column(col, justify="right")
            for config, r in results.items():
                if "error" in r:
                    t.add_row(config, r["error"][:60])
                    continue
                t.add_row(
                    config, fmt(r.get("tokens_per_s"), ".0f"),
                    fmt(r.get("tokens_per_s_over_cpu"), ".2f"), fmt(r.get("decode_ms"), ".1f"),
                    fmt(r.get("decode_ms_over_jax"), ".2f"), fmt(r.get("first_call_s"), ".1f"),
                    fmt(r.get("first_compiles"), "d"), fmt(r.get("executes_per_step"), ".0f"),
                    fmt(r.get("host_reads_per_token"), ".1f"),
                    fmt(r.get("host_bytes_per_step"), ".0f"),
                    fmt(None if r.get("alloc_bytes_per_step") is None
                        else r["alloc_bytes_per_step"] / 2**20, ".2f"),
                    fmt(None if r.get("kv_cache_bytes") is None
                        else r["kv_cache_bytes"] / 2**20, ".1f"),
                    fmt(r.get("peak_device_mb", r.get("peak_rss_mb")), ".0f"),
                    str(r.get("equal_cpu", "-")))
            console.print(t)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--batches", default="8,1")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--large", action="store_true", help="also the 12-layer, hidden-1024 model")
    p.add_argument("--only-large", action="store_true", help="the large model alone")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 16 new tokens, batch 8, 1 round, no diagnosis")
    p.add_argument("--cold", action="store_true",
                   help="every process starts with an empty compile cache dir")
    p.add_argument("--no-diagnose", dest="diagnose", action="store_false")
    p.add_argument("--program-vs-jax", action="store_true",
                   help="only: the captured static-cache decode program against the JAX "
                        "step, in one process per batch (see program_vs_jax)")
    p.add_argument("--cpu-threads", type=int, default=None,
                   help="torch.set_num_threads in every process (default: PyTorch's)")
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--model", default="small", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=8, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.program_vs_jax:
        import warnings

        warnings.filterwarnings("ignore")
        model = "large" if args.only_large else "small"
        return emit({int(b): program_vs_jax(model, int(b), args.new_tokens)
                          for b in args.batches.split(",")}, args.out)
    if args.quick:
        args.new_tokens, args.batches, args.rounds, args.diagnose = 16, "8", 1, False
    args.configs = args.configs.split(",")
    models = ["large"] if args.only_large else ["small"] + (["large"] if args.large else [])
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": {},
              "args": vars(args)}
    for model in models:
        report["results"][model] = {}
        for batch in (int(b) for b in args.batches.split(",")):
            report["results"][model][batch] = bench_one(model, batch, args)
    print_table(report)
    return emit(report, args.out)


if __name__ == "__main__":
    main()
