"""Developer tools: ``python -m torchtpu.tools.coverage`` (OpInfo sweep)."""
