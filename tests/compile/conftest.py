"""Fixtures of the torch.compile tests."""

import pytest

from torchtpu._dynamo import FusedGraph


@pytest.fixture
def graphs(monkeypatch):
    """Every FusedGraph the backend builds during the test."""
    made = []
    init = FusedGraph.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(FusedGraph, "__init__", record)
    return made
