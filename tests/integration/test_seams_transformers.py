"""transformers 5.25 where it decides by device type (docs/device-seams.md,
section "Libraries"; accelerate and the Trainer: tests/integration/test_seams_accelerate.py):
each test runs the real library on tiny random models against CPU. A test
named ``*_still_*`` asserts the library's present behaviour: it fails the day
the library changes it, and then the row in the docs (and the one-liner there)
should change with it.

transformers reads device "tpu" as Google's torch_tpu (another PrivateUse1
backend of that name), so several of its tpu branches run for torchtpu.
torchtpu's fixes (torchtpu/integrations/transformers.py) are applied by an
import hook as transformers is imported, in this process too; the first two
tests run fresh processes, with the hook and with TORCHTPU_LIBRARY_FIXES=0."""

import copy
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from _util import no_fallback

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # device_map and the pipeline test
import transformers.utils.import_utils as import_utils  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _llama_config(**kwargs):
    return transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, **kwargs)


# --- what a process that never calls enable() gets, with and without the hook

_PROBE = textwrap.dedent("""
    import json, sys
    import torch, transformers

    def llama(attn):
        torch.manual_seed(0)
        config = transformers.LlamaConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=64)
        return transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn)

    def flex_on_cpu():
        # A CPU model: torchtpu is installed, tpu is never named.
        try:
            model = llama("flex_attention").eval()
        except ImportError as e:
            return str(e)
        ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            return (model(ids).logits - llama("sdpa").eval()(ids).logits).abs().max().item()

    def pipeline_devices():
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
        open(sys.argv[1] + "/vocab.txt", "w").write("\\n".join(words) + "\\n")
        tokenizer = transformers.BertTokenizerFast(sys.argv[1] + "/vocab.txt")
        config = transformers.BertConfig(vocab_size=len(words), hidden_size=32,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=64, num_labels=3)
        model = transformers.BertForSequenceClassification(config).eval().to("tpu")
        pipe = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer)
        pipe("hello world")
        return [str(pipe.device), str(next(model.parameters()).device)]

    def block_mask():  # the name masking_utils chose at its import
        return sys.modules["transformers.masking_utils"].BlockMask.__name__

    def tp_backend():  # what tp_plan="auto" starts torch.distributed with
        from transformers.distributed import utils
        return utils.DISTRIBUTED_BACKEND_MAP["tpu"]

    out = {"flex": flex_on_cpu(), "pipeline": pipeline_devices(), "block_mask": block_mask(),
           "tp_backend": tp_backend()}
    if sys.argv[2] == "enable":
        import torchtpu.integrations.transformers as tpu_transformers
        tpu_transformers.enable()
        tpu_transformers.enable()  # idempotent
        out["enabled"] = {"flex": flex_on_cpu(), "pipeline": pipeline_devices(),
                          "block_mask": block_mask(), "tp_backend": tp_backend()}
    print(json.dumps(out))
""")


def _probe(tmp_path, fixes, then="none"):
    env = {k: v for k, v in os.environ.items() if k != "TORCHTPU_LIBRARY_FIXES"}
    if not fixes:
        env["TORCHTPU_LIBRARY_FIXES"] = "0"
    run = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path), then], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_fixes_apply_without_enable(tmp_path):
    """A fresh process that imports transformers and never calls enable():
    flex attention on a CPU model gives SDPA's logits (transformers refused it
    for every model once the accelerator is "tpu"), and a pipeline keeps a tpu
    model on tpu (as cuda:0 on a CUDA host), and tp_plan="auto" starts
    torch.distributed with torchtpu's backend."""
    out = _probe(tmp_path, fixes=True)
    assert isinstance(out["flex"], float) and out["flex"] < 1e-5, out
    assert out["pipeline"] == ["tpu:0", "tpu:0"]
    assert out["block_mask"] == "BlockMask"
    assert out["tp_backend"] == "tpu"  # torchtpu's c10d backend


def test_flex_and_pipeline_still_need_the_fixes(tmp_path):
    """With TORCHTPU_LIBRARY_FIXES=0, transformers' own behaviour:
    is_torch_flex_attn_available() is False whenever the accelerator is "tpu",
    so attn_implementation="flex_attention" raises ImportError for a CPU
    model; a pipeline without device means index 0, an index means
    cuda/mlu/npu/xpu/mps, else CPU, so a tpu model is moved back to CPU;
    tp_plan="auto" names torch_tpu's backend "tpu_dist".
    enable() then (twice) applies the same fixes by hand, including to
    masking_utils, which had read the old answer at its import."""
    out = _probe(tmp_path, fixes=False, then="enable")
    assert "PyTorch Flex Attention is not supported on TPU" in out["flex"], out
    assert out["pipeline"] == ["cpu", "cpu"]
    assert out["block_mask"] == "Tensor"  # masking_utils' stand-in without flex
    assert out["tp_backend"] == "tpu_dist"  # torch_tpu's, not registered here
    enabled = out["enabled"]
    assert isinstance(enabled["flex"], float) and enabled["flex"] < 1e-5, out
    assert enabled["pipeline"] == ["tpu:0", "tpu:0"]
    assert enabled["block_mask"] == "BlockMask"
    assert enabled["tp_backend"] == "tpu"


def test_fixes_apply_to_libraries_imported_before_torchtpu():
    """transformers and accelerate imported before torchtpu (torch's backend
    autoload off) are fixed at `import torchtpu`, including the name
    transformers.integrations.accelerate copied from accelerate."""
    code = textwrap.dedent("""
        import torch, transformers
        import transformers.integrations.accelerate as hf_accelerate
        import transformers.pipelines.base as base
        from accelerate.state import PartialState
        import torchtpu
        print(hasattr(base.Pipeline.__init__, "_torchtpu_original"),
              hasattr(hf_accelerate.accelerate_max_memory, "_torchtpu_original"),
              PartialState().device)
    """)
    env = {k: v for k, v in os.environ.items() if k != "TORCHTPU_LIBRARY_FIXES"}
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[-3:] == ["True", "True", "tpu"]


def test_a_fix_that_fails_warns_and_the_import_goes_on():
    """A library that changed shape: the hook warns, naming the module and the
    switch, and leaves the module as it is (the import does not fail)."""
    from types import SimpleNamespace

    from torchtpu.integrations import _library_fixes

    with pytest.warns(RuntimeWarning, match=r"transformers\.pipelines\.base.*"
                                            r"TORCHTPU_LIBRARY_FIXES=0"):
        _library_fixes._apply("transformers.pipelines.base", SimpleNamespace())


@pytest.mark.filterwarnings("ignore:_compile flag:DeprecationWarning")  # transformers' own call
def test_flex_attention_llama_equals_cpu_sdpa():
    """A Llama with flex attention on tpu (GQA, a left-padded row) gives the
    logits and gradients of the same weights with SDPA on CPU."""
    assert import_utils.get_device_type() == "tpu"
    assert import_utils.is_torch_flex_attn_available()
    torch.manual_seed(0)
    config = _llama_config()
    reference = transformers.LlamaForCausalLM(copy.deepcopy(config))  # sdpa, CPU
    model = transformers.AutoModelForCausalLM.from_config(
        copy.deepcopy(config), attn_implementation="flex_attention")
    assert model.config._attn_implementation == "flex_attention"
    model.load_state_dict(reference.state_dict())
    model.to("tpu")
    ids = torch.randint(0, 64, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0
    expected = reference(ids, attention_mask=mask, labels=ids)
    expected.loss.backward()
    with no_fallback():
        got = model(ids.to("tpu"), attention_mask=mask.to("tpu"), labels=ids.to("tpu"))
        got.loss.backward()
    valid = mask.bool()  # padded query rows are don't-care in both
    assert (got.logits.cpu() - expected.logits)[valid].abs().max() < 1e-5
    assert abs(got.loss.item() - expected.loss.item()) < 1e-5
    for p, q in zip(model.parameters(), reference.parameters()):
        assert (p.grad.cpu() - q.grad).abs().max() < 1e-5


# --- from_pretrained: allocator warmup and device_map="auto"


def _save_llama(tmp_path):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_llama_config())
    model.save_pretrained(tmp_path)
    return model


def _load_peak(path, **kwargs):
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    model = transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return model, (torch.tpu.max_memory_allocated() - before) / weights


def test_allocator_warmup_leaves_peak_at_the_weights(tmp_path):
    """caching_allocator_warmup (modeling_utils.py) allocates one tensor as
    large as the weights on any device but cuda/xpu/mps/neuron and frees it
    before the weights land (for CUDA's caching allocator; torchtpu has none):
    on tpu the peak stays the weights' bytes, and they equal the saved ones."""
    reference = _save_llama(tmp_path)
    model, peak = _load_peak(tmp_path, device_map="tpu")
    assert peak < 1.1, peak
    for p, q in zip(model.parameters(), reference.parameters()):
        assert p.device.type == "tpu" and torch.equal(p.cpu(), q)


# --- generate: auto-compile with a static cache


def test_generate_static_cache_compiles_with_tpu_backend():
    """For device "tpu" transformers' default CompileConfig is backend="tpu",
    dynamic=False (meant for torch_tpu; torchtpu registers a backend of that
    name): greedy tokens equal CPU's."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_llama_config(pad_token_id=0)).eval()
    ids = torch.randint(1, 64, (1, 5))
    kwargs = dict(max_new_tokens=4, do_sample=False, cache_implementation="static")
    expected = model.generate(ids, **kwargs)
    model.to("tpu")
    got = model.generate(ids.to("tpu"), **kwargs)
    assert model._last_compile_config.backend == "tpu"
    assert torch.equal(got.cpu(), expected)


# --- MoE experts: grouped_mm counts tokens with an integer histc


def _moe_model():
    config = transformers.Qwen2MoeConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, intermediate_size=64, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, num_experts=4)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def test_moe_grouped_mm_with_integer_histc_equals_cpu():
    """The default experts implementation "grouped_mm" (integrations/moe.py)
    counts tokens per expert with torch.histc on int32 for every device but
    cpu/mps (CUDA has an integer histc; CPU takes floats only). tpu counts
    integers as CUDA does, so the default MoE forward gives CPU's logits, as
    experts_implementation="batched_mm" does."""
    model = _moe_model()
    ids = torch.randint(0, 64, (2, 7))
    with torch.no_grad():
        expected = model(ids).logits
    model.to("tpu")
    assert "grouped_mm" in model.get_experts_implementation().values()
    for implementation in ("grouped_mm", "batched_mm"):
        model.set_experts_implementation(implementation)
        with no_fallback(), torch.no_grad():
            got = model(ids.to("tpu")).logits
        assert (got.cpu() - expected).abs().max() < 1e-5, implementation


# --- pipeline(): an index, or no device, meant CPU


def _classifier(tmp_path):
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
    words += [chr(c) for c in range(ord("a"), ord("z") + 1)]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    tokenizer = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"))
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64, num_labels=3)
    return transformers.BertForSequenceClassification(config).eval(), tokenizer


def _scores(pipe):
    out = pipe("hello world")
    while isinstance(out[0], list):
        out = out[0]
    return {r["label"]: r["score"] for r in out}


def test_pipeline_index_means_tpu(tmp_path):
    """No device or an index keeps/puts the model on tpu (as cuda:N on a CUDA
    host), with CPU's scores; "cpu" and -1 still mean CPU; a model dispatched
    with device_map runs its inputs on the map's tpu."""
    model, tokenizer = _classifier(tmp_path)

    def pipe(device, m=model):
        return transformers.pipeline("text-classification", model=m, tokenizer=tokenizer,
                                     device=device, top_k=None)

    expected = _scores(pipe("cpu"))
    for device in (None, 0, "tpu"):
        model.to("tpu")
        p = pipe(device)
        assert p.device.type == "tpu"  # "tpu" stays index-less, as "cuda" does
        assert next(model.parameters()).device == torch.device("tpu", 0)
        with no_fallback():
            got = _scores(p)
        assert max(abs(got[k] - expected[k]) for k in expected) < 1e-6
    for device in ("cpu", -1):
        assert pipe(device).device == torch.device("cpu")
        assert next(model.parameters()).device.type == "cpu"
    model.save_pretrained(tmp_path)
    dispatched = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path, device_map="auto", max_memory={0: "1GiB", "cpu": "1GiB"})
    p = pipe(None, dispatched)
    assert p.device == torch.device("tpu", 0)
    assert max(abs(v - expected[k]) for k, v in _scores(p).items()) < 1e-6


def test_generate_batch_continuous_batching_equals_cpu():
    """generate_batch (continuous batching) asks torch.get_device_module() for
    a Stream (torch.tpu.Stream) and finds no graph class for "tpu" (its table
    lists CUDAGraph/XPUGraph), so it runs uncaptured on a side stream: the
    tokens equal CPU's."""
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        _llama_config(pad_token_id=0, eos_token_id=None, bos_token_id=None)).eval()
    generation = transformers.GenerationConfig(max_new_tokens=4, do_sample=False, pad_token_id=0,
                                               eos_token_id=None)
    batching = ContinuousBatchingConfig(num_blocks=16, max_batch_tokens=64)

    def run():
        out = model.generate_batch(inputs=[[5, 6, 7], [8, 9, 10, 11, 12]],
                                   generation_config=generation,
                                   continuous_batching_config=batching)
        return {k: v.generated_tokens for k, v in out.items()}

    expected = run()
    model.to("tpu")
    assert run() == expected
