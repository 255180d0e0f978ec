"""Runnable examples, the project's main job: ``python -m torchtpu.examples.<name>``.

- ``train_digits``: a small CNN trained on scikit-learn's digits (8x8 images).
- ``embed``: sentence embeddings with all-MiniLM-L6-v2 (transformers).
"""
