"""Environment variables: one parsing rule, and a bad value is an error naming
the variable (csrc/settings/settings.h, docs/environment.md). The rule itself
is tested in csrc/tests/settings_test.cc; here, that Python and the runtime
both go through it."""

import os
import subprocess
import sys

import pytest

from torchtpu import _C


def _run(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


def test_bindings_apply_the_rule(monkeypatch):
    monkeypatch.setenv("TORCHTPU_SETTINGS_PROBE", "Off")
    assert _C._setting_flag("TORCHTPU_SETTINGS_PROBE", True) is False
    monkeypatch.setenv("TORCHTPU_SETTINGS_PROBE", "7")
    assert _C._setting_integer("TORCHTPU_SETTINGS_PROBE", 1, 1, 10) == 7
    with pytest.raises(ValueError, match=r"TORCHTPU_SETTINGS_PROBE='7' is not valid: "
                                         r"expected an integer from 1 to 5"):
        _C._setting_integer("TORCHTPU_SETTINGS_PROBE", 1, 1, 5)
    with pytest.raises(ValueError, match="expected one of warn, error"):
        _C._setting_choice("TORCHTPU_SETTINGS_PROBE", "warn", ["warn", "error"])
    monkeypatch.setenv("TORCHTPU_SETTINGS_PROBE", "")
    assert _C._setting_choice("TORCHTPU_SETTINGS_PROBE", "warn", ["warn", "error"]) == "warn"


def test_a_bad_config_value_fails_the_import():
    r = _run("import torchtpu", TORCHTPU_FUSED_STEP_FLUSH="maybe")
    assert r.returncode != 0
    assert "ValueError: TORCHTPU_FUSED_STEP_FLUSH='maybe' is not valid" in r.stderr


def test_a_bad_runtime_value_fails_the_first_use_and_words_agree():
    code = (
        "import torch, torchtpu\n"
        "try:\n"
        "    torch.ones(1, device='tpu')\n"
        "except RuntimeError as e:\n"
        "    print('ERR', e)\n")
    r = _run(code, TORCHTPU_EAGER_MODE="fusd")
    assert "ERR TORCHTPU_EAGER_MODE='fusd' is not valid: expected one of strict, debug, fused" \
        in r.stdout, r.stdout + r.stderr
    # `true` is a flag's word for every variable now (TORCHTPU_FUSED_HYBRID
    # once took only `1`); the mode words are exact.
    code = ("import torch, torchtpu\n"
            "torch.ones(1, device='tpu')\n"
            "print(torchtpu.get_eager_mode(), torchtpu.fused_hybrid())\n")
    r = _run(code, TORCHTPU_EAGER_MODE="fused", TORCHTPU_FUSED_HYBRID="true")
    assert r.stdout.split()[-2:] == ["fused", "True"], r.stdout + r.stderr
