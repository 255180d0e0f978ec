"""torch.distributed on tpu across 2 processes (the c10d backend "tpu").

Each scenario group is ONE launch of 2 processes (tests/distributed/_dist_worker.py), each
with its own single tpu device (TORCHTPU_CPU_DEVICES=1) and a TCPStore on
127.0.0.1 at a free port; the processes print one line per check, and each
check is its own test here. Every launch is bounded by a timeout that fails it.
"""

import os
import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.alone  # passes: tests/README.md

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAUNCH_TIMEOUT = 150  # seconds for a whole group (2 processes on a busy 2-core machine)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env():
    env = dict(os.environ)
    env["TORCHTPU_CPU_DEVICES"] = "1"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TORCHTPU_EAGER_MODE", None)
    return env


def launch(group, world=2, worker="_dist_worker.py", **env):
    """Runs one scenario group of `worker` on `world` ranks; returns
    ({rank: {check: message}}, {rank: log})."""
    port = str(_free_port())
    env = {**_env(), **env}
    procs = [
        subprocess.Popen([sys.executable, os.path.join(HERE, worker), group,
                          str(r), str(world), port], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
        for r in range(world)
    ]
    results, logs = {}, {}
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out = (p.communicate()[0] or "") + "\n<killed: launch timed out>"
        logs[r] = out
        checks = {}
        for line in out.splitlines():
            if line.startswith("CHECK "):
                parts = line.split(" ", 3)
                checks[parts[1]] = "ok" if parts[2] == "ok" else parts[3] if len(parts) > 3 else ""
        results[r] = checks
    return results, logs


@pytest.fixture(scope="module")
def main_group():
    return launch("main")


@pytest.mark.parametrize("world", [3, 4])
def test_late_peers_in_groups_of_more_than_two(world):
    """Collectives wait for a late peer in groups of 3 and 4 ranks (the store
    form of the signature exchange; _dist_many_ranks.py)."""
    name = f"late_peers_{world}_ranks"
    _assert_check(launch("late_peers", world=world, worker="_dist_many_ranks.py"), name,
                  ranks=range(world))


@pytest.fixture(scope="module")
def failure_group():
    return launch("failure", TORCH_DISTRIBUTED_DEBUG="DETAIL")


MAIN_CHECKS = (
    [f"all_reduce_{op}_{dt}" for dt in ("float32", "int64", "bfloat16")
     for op in ("sum", "avg", "min", "max", "product")]
    + ["default_backend_map", "repeated_all_reduce", "backend_string_cpu_gloo_tpu_tpu",
       "pjrt_kv_callbacks_across_processes", "pjrt_kv_missing_keys",
       "broadcast", "all_gather", "all_gather_uneven", "all_gather_into_tensor",
       "reduce_scatter", "reduce_scatter_tensor", "all_to_all_single_uneven",
       "scatter_gather_reduce", "send_recv_barrier", "non_contiguous", "async_wait_future",
       "async_issue_does_not_wait_for_peer", "async_mixed_in_order",
       "async_issue_does_not_wait_for_producer", "async_input_read_at_call",
       "read_output_while_in_flight",
       "cpu_tensor_rejected", "group_name_kept", "ddp_sgd_5_steps",
       "ddp_no_sync_accumulation", "ddp_find_unused_parameters", "future_completes_without_wait",
       "ddp_many_buckets", "future_gets_error", "peer_exit_raises", "staging_adopted",
       "staging_same_bits_every_dtype"]
)


def _assert_check(results_logs, name, ranks=(0, 1)):
    results, logs = results_logs
    for r in ranks:
        msg = results[r].get(name)
        assert msg is not None, f"rank {r} never reported {name}:\n{logs[r][-3000:]}"
        assert msg == "ok", f"rank {r}: {name}: {msg}"


@pytest.mark.parametrize("name", MAIN_CHECKS)
def test_main(main_group, name):
    _assert_check(main_group, name)


@pytest.mark.parametrize("name", ["mismatched_shapes_raise"])
def test_failure(failure_group, name):
    _assert_check(failure_group, name)


@pytest.fixture(scope="module", params=["store", "all_reduce"])
def mismatch_group(request):
    # Both forms of the signature exchange (csrc/distributed/signature_check.h): through
    # the store's queues, or one all_reduce on the signature group.
    env = {"TORCHTPU_DIST_STORE_RANKS": "8" if request.param == "store" else "0"}
    return launch("mismatch", TORCH_DISTRIBUTED_DEBUG="OFF", **env)


MISMATCH_CHECKS = [
    "mismatch_all_reduce_numel",
    "mismatch_all_reduce_dtype",
    "mismatch_broadcast",
    "mismatch_different_collectives",
    "mismatch_local_error_reaches_peer",
    "mismatch_reduce_scatter_tensor",
    "mismatch_uneven_all_gather_still_works",
    "mismatch_deferred_device_error_reaches_peer",
    "user_send_recv_between_checked_calls",
    "mismatch_behind_queued_async_calls",
]


@pytest.mark.parametrize("name", MISMATCH_CHECKS)
def test_mismatch_across_ranks_raises_everywhere(mismatch_group, name):
    # Without the debug wrapper gloo would abort the process (as for CPU tensors).
    _assert_check(mismatch_group, name)


@pytest.fixture(scope="module")
def digits_single():
    pytest.importorskip("sklearn", reason="train_digits needs scikit-learn's digits dataset")
    from torchtpu.examples import train_digits

    return train_digits.train("tpu", epochs=DIGITS_EPOCHS, seed=0, progress=False, log=None)


DIGITS_EPOCHS = 2


@pytest.mark.parametrize("flag", ["--ddp", "--fsdp"])
def test_train_digits_distributed_matches_single_process(digits_single, flag):
    """torchrun --nproc-per-node 2 ... --ddp/--fsdp gives the single process's losses."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
           "-m", "torchtpu.examples.train_digits", flag, "--epochs", str(DIGITS_EPOCHS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT,
                          timeout=LAUNCH_TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("epoch ")]
    losses = [float(line.split("loss ")[1].split()[0]) for line in lines]
    accuracies = [float(line.split("accuracy ")[1].split()[0]) for line in lines]
    assert len(losses) == DIGITS_EPOCHS, proc.stdout  # rank 0 alone prints
    for epoch, (d, s) in enumerate(zip(losses, digits_single.losses), start=1):
        assert abs(d - s) <= 1e-4 * abs(s), f"epoch {epoch}: {flag} {d} vs single {s}"
    assert abs(accuracies[-1] - digits_single.final_accuracy) < 1e-3
    assert "final test accuracy" in proc.stdout


def test_init_without_master_addr_raises(monkeypatch):
    import torch.distributed as dist

    import torchtpu  # noqa: F401  (registers the backend)

    for var in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="environment variable"):
        dist.init_process_group()
    assert not dist.is_initialized()
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu"


@pytest.fixture(scope="module")
def fsdp_group():
    return launch("fsdp")


@pytest.mark.parametrize("name", ["dtensor", "functional_collectives", "fsdp2_adamw_5_steps",
                                  "fsdp2_state_dict_save_load"])
def test_fsdp_dtensor(fsdp_group, name):
    _assert_check(fsdp_group, name)

