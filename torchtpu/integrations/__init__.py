"""Glue between torchtpu and third-party libraries that pick devices themselves.

One module per library, imported only on request (``import torchtpu`` imports
none of them, and none is a dependency of torchtpu):

- :mod:`torchtpu.integrations.lightning`: a Lightning ``Accelerator`` and
  ``Strategy`` for tpu (``Trainer(strategy=TPUStrategy())``).
- :mod:`torchtpu.integrations.safetensors`: ``load_file`` / ``safe_open`` that
  take ``device="tpu"``.
- :mod:`torchtpu.integrations.flex_attention`: ``enable()`` lets
  ``torch.nn.attention.flex_attention`` take tpu tensors.

docs/integrations.md says what each was measured against and its limits.
"""
