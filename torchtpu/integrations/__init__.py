"""Glue between torchtpu and third-party libraries that pick devices themselves.

One module per library (none is a dependency of torchtpu). ``import torchtpu``
enables flex_attention and checkpoint, and installs an import hook
(``_library_fixes``) that applies the transformers and accelerate fixes as
those libraries are imported (``TORCHTPU_LIBRARY_FIXES=0`` turns it off); the
others are imported only on request:

- :mod:`torchtpu.integrations.lightning`: a Lightning ``Accelerator`` and
  ``Strategy`` for tpu (``Trainer(strategy=TPUStrategy())``).
- :mod:`torchtpu.integrations.safetensors`: ``load_file`` / ``safe_open`` that
  take ``device="tpu"``.
- :mod:`torchtpu.integrations.flex_attention`: ``enable()`` lets
  ``torch.nn.attention.flex_attention`` take tpu tensors.
- :mod:`torchtpu.integrations.transformers`: lets transformers use flex
  attention with torchtpu installed, and makes ``pipeline`` device indices
  mean tpu; its ``enable()`` applies these and accelerate's by hand.
- :mod:`torchtpu.integrations.accelerate`: makes accelerate's default device
  and ``device_map="auto"`` budget include tpu, and its Inductor requests
  compile with torchtpu's backend.
- :mod:`torchtpu.integrations.checkpoint`: ``enable()`` lets
  ``torch.compile(backend="tpu")`` compile ``checkpoint`` over dropout.

docs/integrations.md and docs/integrations-hf.md say what each was measured
against and its limits; docs/device-seams.md (Libraries) lists every library
call site that decides by device type.
"""
