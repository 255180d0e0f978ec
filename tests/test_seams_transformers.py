"""transformers 5.25 where it decides by device type (docs/device-seams.md,
section "Libraries"; accelerate and the Trainer: tests/test_seams_accelerate.py):
each test runs the real library on tiny random models against CPU. A test
named ``*_still_*`` asserts the library's present behaviour: it fails the day
the library changes it, and then the row in the docs (and the one-liner there)
should change with it.

transformers reads device "tpu" as Google's torch_tpu (another PrivateUse1
backend of that name), so several of its tpu branches run for torchtpu."""

import copy

import pytest
import torch

from _util import no_fallback

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # device_map and the pipeline test
import transformers.utils.import_utils as import_utils  # noqa: E402

import torchtpu.integrations.transformers as tpu_transformers  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _llama_config(**kwargs):
    return transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, **kwargs)


# --- flex attention: refused for every model once the accelerator is "tpu"


def test_flex_attention_still_refused_without_enable():
    """transformers' own answer (import_utils.is_torch_flex_attn_available):
    False when the current accelerator is "tpu", as it is whenever torchtpu
    is loaded, so attn_implementation="flex_attention" raises ImportError."""
    assert import_utils.get_device_type() == "tpu"
    assert tpu_transformers._original_flex_available() is False


@pytest.mark.filterwarnings("ignore:_compile flag:DeprecationWarning")  # transformers' own call
def test_flex_attention_llama_equals_cpu_sdpa():
    """After enable(): a Llama with flex attention on tpu (GQA, a left-padded
    row) gives the logits and gradients of the same weights with SDPA on CPU."""
    tpu_transformers.enable()
    tpu_transformers.enable()  # idempotent
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


def test_pipeline_still_moves_a_tpu_model_to_cpu(tmp_path, monkeypatch):
    """transformers' own Pipeline.__init__: no device means index 0, and an
    index means cuda/mlu/npu/xpu/mps, else CPU, so a model on tpu is moved back
    to CPU (on a CUDA host it stays on cuda:0)."""
    monkeypatch.setattr(transformers.pipelines.base.Pipeline, "__init__",
                        tpu_transformers._original_pipeline_init)
    model, tokenizer = _classifier(tmp_path)
    for device in (None, 0):
        model.to("tpu")
        pipe = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer,
                                     device=device, top_k=None)
        assert pipe.device == torch.device("cpu")
        assert next(model.parameters()).device.type == "cpu"


def test_pipeline_index_means_tpu_after_enable(tmp_path):
    """After enable(): no device or an index keeps/puts the model on tpu (as
    cuda:N on a CUDA host), with CPU's scores; "cpu" and -1 still mean CPU; a
    model dispatched with device_map runs its inputs on the map's tpu."""
    tpu_transformers.enable()
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
