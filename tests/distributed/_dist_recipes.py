"""One rank of tests/distributed/test_distributed_recipes.py: training recipes across 2
processes whose tpu results must equal the same recipe on CPU over gloo (or,
where PyTorch has no CPU form, the single-process equivalent). Prints one line
per check, ``CHECK <name> ok`` or ``CHECK <name> FAIL <message>``.

Usage: python _dist_recipes.py <group> <rank> <world> <port>
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torchtpu  # noqa: F401
from _dist_worker import report

TIMEOUT = datetime.timedelta(seconds=60)


def _max_diff(a, b):
    return max((x.detach().cpu() - y.detach().cpu()).abs().max().item() for x, y in zip(a, b))


def _batch(rank, step, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(100 * rank + step))


# ---------------------------------------------------------------- DDP comm hooks

def _hooks():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as default
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
    from torch.distributed.algorithms.ddp_comm_hooks import quantization_hooks as quant

    def power(batched):
        def make(group):
            state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                           start_powerSGD_iter=2, min_compression_rate=0.5)
            hook = powersgd.batched_powerSGD_hook if batched else powersgd.powerSGD_hook
            return state, hook
        return make

    return {
        "allreduce": lambda g: (g, default.allreduce_hook),
        "fp16_compress": lambda g: (g, default.fp16_compress_hook),
        "bf16_compress": lambda g: (g, default.bf16_compress_hook),
        "quantize_per_tensor": lambda g: (g, quant.quantization_pertensor_hook),
        "quantize_per_channel": lambda g: (g, quant.quantization_perchannel_hook),
        "powersgd": power(False),
        "batched_powersgd": power(True),
    }


def _ddp_with_hook(rank, device, group, make_hook, steps=5):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.001)  # several buckets
    ddp.register_comm_hook(*make_hook(group))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(steps):
        opt.zero_grad()
        ddp(_batch(rank, step, 8, 16).to(device)).square().mean().backward()
        opt.step()
    return list(model.parameters())


def check_comm_hooks(rank, tpu_pg, cpu_pg):
    # A hook PyTorch's own code fails with on gloo-CPU (bf16_compress wants
    # NCCL or XCCL; the quantization hooks index all_gather's result as NCCL's;
    # batched PowerSGD's _orthogonalize asserts 3-d matrices it never makes)
    # must fail the same way on tpu, never hang.
    for name, make_hook in _hooks().items():
        def run(make_hook=make_hook):
            try:
                expected = _ddp_with_hook(rank, "cpu", cpu_pg, make_hook)
            except Exception as cpu_error:  # noqa: BLE001 (compared below)
                try:
                    _ddp_with_hook(rank, "tpu", tpu_pg, make_hook)
                except Exception as tpu_error:  # noqa: BLE001
                    assert type(tpu_error) is type(cpu_error), (tpu_error, cpu_error)
                    return
                raise AssertionError(f"gloo-CPU raised {cpu_error!r}, tpu did not") from None
            got = _ddp_with_hook(rank, "tpu", tpu_pg, make_hook)
            diff = _max_diff(got, expected)
            assert diff < 1e-5, f"parameters differ from gloo-CPU's by {diff}"
        report(f"comm_hook_{name}", run)


# ---------------------------------------------------------------- SyncBatchNorm

def check_sync_batch_norm(rank, world, tpu_pg):
    # PyTorch has no CPU SyncBatchNorm; its meaning is batch norm over the
    # ranks' batches together, which one CPU process computes directly.
    def run():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        sync = nn.SyncBatchNorm.convert_sync_batchnorm(net, process_group=tpu_pg)
        ref = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        ref.load_state_dict(net.state_dict())
        sync = sync.to("tpu")
        xs = [_batch(r, 0, 2, 3, 7, 7) for r in range(world)]
        x = xs[rank].to("tpu").requires_grad_()
        out = sync(x)
        weight = _batch(7, 0, *out.shape)  # the same loss weights on every rank
        (out * weight.to("tpu")).sum().backward()
        full = torch.cat(xs).requires_grad_()
        ref_out = ref(full)
        (ref_out * torch.cat([weight] * world)).sum().backward()
        n = xs[0].shape[0]
        mine = slice(rank * n, (rank + 1) * n)
        torch.testing.assert_close(out.detach().cpu(), ref_out.detach()[mine], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(x.grad.cpu(), full.grad[mine], atol=1e-5, rtol=1e-5)
        for name in ("running_mean", "running_var"):
            torch.testing.assert_close(getattr(sync[1], name).cpu(), getattr(ref[1], name),
                                       atol=1e-6, rtol=1e-5)
        # Parameter gradients are per rank; summed over ranks they are the full batch's.
        for p, q in zip(sync.parameters(), ref.parameters()):
            g = p.grad.clone()
            dist.all_reduce(g, group=tpu_pg)
            torch.testing.assert_close(g.cpu(), q.grad, atol=1e-4, rtol=1e-5)
    report("sync_batch_norm", run)


# ---------------------------------------------------------- tied weights under DDP

def check_tied_gpt2_ddp(rank, tpu_pg, cpu_pg):
    def run():
        import transformers

        config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64,
                                         n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_pdrop=0.0)
        results = []
        for device, group in (("cpu", cpu_pg), ("tpu", tpu_pg)):
            torch.manual_seed(0)
            model = transformers.GPT2LMHeadModel(config).to(device)
            n_params = len(list(model.parameters()))
            ddp = DDP(model, process_group=group)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            for step in range(10):
                ids = torch.randint(0, 64, (2, 8),
                                    generator=torch.Generator().manual_seed(10 * rank + step))
                opt.zero_grad()
                ddp(ids.to(device), labels=ids.to(device)).loss.backward()
                opt.step()
            assert model.lm_head.weight is model.transformer.wte.weight
            results.append((n_params, list(model.parameters())))
        assert results[0][0] == results[1][0], (results[0][0], results[1][0])
        diff = _max_diff(results[1][1], results[0][1])
        assert diff < 1e-5, f"parameters differ from gloo-CPU's by {diff}"
    report("tied_gpt2_ddp_10_steps", run)


# ---------------------------------------------------------------- FSDP2

def check_fully_shard_cpu_model(rank, world):
    # A model still on CPU, sharded over a tpu mesh, moves to tpu as with a
    # CUDA mesh (FSDP2 swaps parameters with set_data).
    def run():
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("tpu", (world,))
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
        ref = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
        ref.load_state_dict(model.state_dict())
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        assert all(p.device.type == "tpu" for p in model.parameters())
        xs = [_batch(r, 1, 4, 8) for r in range(world)]
        model(xs[rank].to("tpu")).sum().backward()
        ref(torch.cat(xs)).sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            full = p.grad.full_tensor().cpu() * world  # FSDP2 averages over ranks
            torch.testing.assert_close(full, q.grad, atol=1e-5, rtol=1e-5)
    report("fully_shard_cpu_model_tpu_mesh", run)


def group_recipes(rank, world):
    dist.init_process_group("cpu:gloo,tpu:tpu", timeout=TIMEOUT)
    tpu_pg = dist.new_group(backend="tpu", timeout=TIMEOUT)
    cpu_pg = dist.new_group(backend="gloo", timeout=TIMEOUT)
    check_comm_hooks(rank, tpu_pg, cpu_pg)
    check_sync_batch_norm(rank, world, tpu_pg)
    check_tied_gpt2_ddp(rank, tpu_pg, cpu_pg)
    check_fully_shard_cpu_model(rank, world)
    dist.barrier()
    dist.destroy_process_group()


def group_local_ranks(rank, world):
    # A script written for CUDA, cuda:{rank} changed to tpu:{rank}, with no
    # TORCHTPU_CPU_DEVICES: the CPU plugin gets one device per local rank.
    def run():
        dist.init_process_group(timeout=TIMEOUT)
        device = torch.device("tpu", rank)
        torch.tpu.set_device(device)
        assert torch.tpu.device_count() == world
        model = DDP(nn.Linear(4, 2).to(device), device_ids=[rank])
        t = torch.full((3,), float(rank + 1), device=device)
        dist.all_reduce(t)
        assert t.device == device and t.cpu().tolist() == [3.0] * 3
        model(torch.ones(2, 4, device=device)).sum().backward()
        assert model.module.weight.grad.device == device
        dist.destroy_process_group()
    report("tpu_rank_device_per_local_rank", run)


def group_tp_plan(rank, world):
    # transformers' own tensor parallelism under torchrun: from_pretrained
    # starts torch.distributed itself (no process group yet) with the backend
    # its map names for the accelerator, then shards by the model's tp plan.
    def run():
        from torch.distributed.tensor import DTensor
        from transformers import AutoModelForCausalLM, DistributedConfig

        os.environ["LOCAL_RANK"] = str(rank)
        path = os.environ["TP_MODEL_DIR"]
        ref = torch.load(os.path.join(path, "reference.pt"))
        model = AutoModelForCausalLM.from_pretrained(path, tp_plan="auto", dtype=torch.float32)
        assert dist.get_backend() == "tpu", dist.get_backend()
        weight = model.model.layers[0].mlp.down_proj.weight
        assert isinstance(weight, DTensor) and weight.device.type == "tpu", type(weight)
        ids = ref["input_ids"].to(model.device)
        out = model(ids, labels=ids)
        out.loss.backward()
        torch.testing.assert_close(out.logits.detach().cpu(), ref["logits"], atol=1e-5, rtol=1e-5)
        grad = weight.grad.full_tensor().cpu()
        torch.testing.assert_close(grad, ref["grad"], atol=1e-6, rtol=1e-5)
        # FSDP2 through transformers' DistributedConfig, on that process group:
        # every rank has the whole batch, so the averaged gradient is CPU's.
        model = AutoModelForCausalLM.from_pretrained(
            path, distributed_config=DistributedConfig(fsdp_size=world), dtype=torch.float32)
        out = model(ids, labels=ids)
        out.loss.backward()
        torch.testing.assert_close(out.logits.detach().cpu(), ref["logits"], atol=1e-5, rtol=1e-5)
        grad = model.model.layers[0].mlp.down_proj.weight.grad.full_tensor().cpu()
        torch.testing.assert_close(grad, ref["grad"], atol=1e-6, rtol=1e-5)
    report("transformers_tp_plan_auto", run)

    # diffusers' tensor parallelism on the process group transformers made: a
    # tiny Flux transformer sharded after loading (enable_parallelism) and
    # while loading (each rank streams its own slices).
    def diffusers_tp():
        from diffusers import FluxTransformer2DModel, TensorParallelConfig
        from torch.distributed.tensor import DTensor

        path = os.path.join(os.environ["TP_MODEL_DIR"], "flux")
        ref = torch.load(os.path.join(path, "reference.pt"))
        inputs = {k: v.to("tpu") for k, v in ref["inputs"].items()}
        after = FluxTransformer2DModel.from_pretrained(path).to("tpu")
        after.enable_parallelism(config=TensorParallelConfig(tp_degree=world))
        loaded = FluxTransformer2DModel.from_pretrained(
            path, parallel_config=TensorParallelConfig(tp_degree=world))
        for model in (after, loaded):
            weight = model.transformer_blocks[0].attn.to_q.weight
            assert isinstance(weight, DTensor) and weight.device.type == "tpu", type(weight)
            out = model(**inputs).sample.detach().cpu()
            torch.testing.assert_close(out, ref["sample"], atol=1e-5, rtol=1e-5)
        dist.destroy_process_group()
    report("diffusers_tensor_parallel", diffusers_tp)


def main():
    group, rank, world, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE=str(world))
    {"recipes": group_recipes, "local_ranks": group_local_ranks,
     "tp_plan": group_tp_plan}[group](rank, world)


if __name__ == "__main__":
    main()
