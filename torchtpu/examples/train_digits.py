"""Trains a small CNN on scikit-learn's digits dataset, on tpu or on CPU.

    python -m torchtpu.examples.train_digits [--device tpu|cpu] [--epochs N]
        [--seed S] [--batch-size B] [--optimizer sgd|adamw] [--mode strict|debug|fused]
        [--compile] [--ddp | --fsdp | --spmd N]
    torchrun --nproc-per-node 2 -m torchtpu.examples.train_digits --ddp
    python -m torchtpu.examples.train_digits --spmd 4

With ``--ddp`` (under torchrun, or any launcher that sets the ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` variables), every process trains
a ``DistributedDataParallel`` copy on its own tpu device and takes its share of
each batch; batch-norm statistics are reduced over the whole batch and each
rank's loss is scaled so that DDP's gradient average equals the single-process
gradient, so the per-epoch losses match the single-process run. Rank 0 evaluates
and prints; the others go on to the next step and wait at its first collective.
``--fsdp`` is the same with FSDP2 (``fully_shard`` on each block and the root)
instead of DDP; there every rank evaluates (the forward gathers parameters).
``--spmd N`` trains data-parallel over N devices of this one process, each
step ONE program over them (torchtpu/examples/train_digits_spmd.py; SGD only;
on the CPU plugin it asks for N devices unless ``TORCHTPU_CPU_DEVICES`` is set).

The data are the 1797 real 8x8 grey-scale digit images shipped inside
scikit-learn (``sklearn.datasets.load_digits``), scaled to [0, 1], split 80/20
(train 1437, test 360) by a seeded permutation. The model is
conv-batchnorm-relu-maxpool twice, then a linear layer; there is no dropout, so
for a given seed a tpu run and a ``--device cpu`` run see exactly the same
numbers and their per-epoch losses agree to float32 rounding.

No training step reads a tpu value: the loss is summed on the device and read
once per epoch, so in strict mode the host waits only at an epoch's end (and,
briefly, at its start, where ``index_select`` checks the shuffled index range).
In fused mode nothing inside the step loop flushes either: an epoch's steps are
recorded into one graph, run as one program at that read. The first epoch (no
optimizer state yet) and the later ones are two graphs, each compiled once (tens
of seconds on the CPU plugin; the persistent cache makes a second run start
fast); later epochs of the same shape only hit the cache.
"""

import argparse
import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

import torchtpu

NUM_CLASSES = 10
TEST_FRACTION = 0.2


@dataclass
class TrainResult:
    """What :func:`train` measured.

    Attributes:
        losses: mean training cross-entropy of each epoch (per sample, nats).
        accuracies: test accuracy (fraction in [0, 1]) after each epoch.
        final_accuracy: ``accuracies[-1]``.
        epoch_seconds: wall seconds of each epoch's training steps, including the
            one read of the loss at its end, excluding evaluation. The first epoch
            includes compilation on tpu.
        steps_per_epoch: optimizer steps per epoch.
    """

    losses: list = field(default_factory=list)
    accuracies: list = field(default_factory=list)
    final_accuracy: float = 0.0
    epoch_seconds: list = field(default_factory=list)
    steps_per_epoch: int = 0


class DigitsCNN(nn.Module):
    """Input ``[N, 1, 8, 8]`` float32, output logits ``[N, 10]``."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.classifier = nn.Linear(32 * 2 * 2, NUM_CLASSES)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def load_data(seed):
    """The digits split 80/20 by a permutation seeded with ``seed``.

    Returns:
        ``(x_train, y_train, x_test, y_test)``, CPU tensors: images
        ``[N, 1, 8, 8]`` float32 in [0, 1], labels ``[N]`` int64.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = math.ceil(TEST_FRACTION * len(y))
    test, train_idx = perm[:n_test], perm[n_test:]
    return x[train_idx], y[train_idx], x[test], y[test]


class _SumOverRanks(torch.autograd.Function):
    """Sum of a tensor over the ranks of `group`; the gradient is summed too
    (every rank's loss depends on every rank's input)."""

    @staticmethod
    def forward(ctx, t, group):
        import torch.distributed as dist

        ctx.group = group
        out = t.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        import torch.distributed as dist

        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class GlobalBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d whose training statistics cover the batch of every rank.

    Input ``[N, C, H, W]`` float32 (this rank's share of the batch). In training
    the per-channel sum and squared deviation are summed over the ranks by
    :class:`_SumOverRanks` (its backward sums the gradients too), so forward, backward and the
    running statistics are those of one process seeing the whole batch. In eval mode it is
    BatchNorm2d.
    """

    def __init__(self, bn, group=None):
        super().__init__(bn.num_features, bn.eps, bn.momentum, bn.affine,
                         bn.track_running_stats, device=bn.weight.device)
        self.load_state_dict(bn.state_dict())
        self.group = group

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        import torch.distributed as dist

        group = self.group or dist.group.WORLD
        all_reduce = lambda t, group: _SumOverRanks.apply(t, group)  # noqa: E731
        count = torch.tensor([float(x.shape[0] * x.shape[2] * x.shape[3])])
        dist.all_reduce(count, group=group)  # a CPU scalar: the host knows the sizes
        n = count.item()
        mean = all_reduce(x.sum(dim=(0, 2, 3)), group=group) / n
        centered = x - mean[None, :, None, None]
        var = all_reduce((centered * centered).sum(dim=(0, 2, 3)), group=group) / n
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            m = self.momentum
            self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
            self.running_var.mul_(1 - m).add_(var.detach() * (n / (n - 1)), alpha=m)
        y = centered * torch.rsqrt(var + self.eps)[None, :, None, None]
        return y * self.weight[None, :, None, None] + self.bias[None, :, None, None]


def _global_batchnorm(module, group):
    for name, child in module.named_children():
        if isinstance(child, nn.BatchNorm2d):
            setattr(module, name, GlobalBatchNorm2d(child, group))
        else:
            _global_batchnorm(child, group)
    return module


def make_optimizer(name, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.02, momentum=0.9)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2)
    raise ValueError(f"optimizer must be 'sgd' or 'adamw', got {name!r}")


def evaluate(model, x, y):
    """Test accuracy as a fraction; one read of the device."""
    model.eval()
    with torch.no_grad():
        correct = model(x).argmax(dim=1).eq(y).sum()
    model.train()
    return correct.item() / len(y)


def train(device="tpu", epochs=10, seed=0, batch_size=64, optimizer="sgd", mode=None,
          progress=True, log=print, compile=False, ddp=False, fsdp=False):
    """Trains :class:`DigitsCNN` and evaluates it after every epoch.

    Weights are initialised on CPU from ``seed`` and then moved, and batches are
    drawn in an order fixed by ``seed`` on CPU, so runs on different devices see
    identical numbers.

    Args:
        device: ``"tpu"``, ``"cpu"`` or any torch device string.
        epochs: passes over the 1437 training images.
        seed: seeds the split, the initial weights and the batch order.
        batch_size: images per step; the last batch of an epoch may be smaller.
        optimizer: ``"sgd"`` (momentum 0.9) or ``"adamw"``.
        mode: ``"strict"``, ``"debug"`` or ``"fused"`` sets torchtpu's eager
            mode for a tpu run (restored afterwards); None leaves it as it is.
        progress: show a tqdm bar per epoch.
        log: called with one line per epoch; None for silence.
        compile: run the model through ``torch.compile(model, backend="tpu")``
            on tpu (``backend="inductor"`` on CPU); the optimizer stays eager.
        ddp: train with ``DistributedDataParallel`` over the default process
            group (``torch.distributed`` must be initialised); each rank takes
            its share of every batch. Losses are those of the whole batch;
            accuracies are computed on rank 0 only (0.0 on the other ranks).
        fsdp: like ``ddp`` with FSDP2's ``fully_shard`` instead of DDP.

    Returns:
        TrainResult.
    """
    device = torch.device(device)
    if mode is None or device.type != "tpu":
        return _train(
            device, epochs, seed, batch_size, optimizer, progress, log, compile, ddp, fsdp
        )
    previous_mode = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode(mode)
    try:
        return _train(
            device, epochs, seed, batch_size, optimizer, progress, log, compile, ddp, fsdp
        )
    finally:
        torchtpu.set_eager_mode(previous_mode)


def _train(device, epochs, seed, batch_size, optimizer, progress, log, compile=False,
           ddp=False, fsdp=False):
    x_train, y_train, x_test, y_test = load_data(seed)
    torch.manual_seed(seed)
    model = DigitsCNN().to(device)
    rank, world, net = 0, 1, model
    if ddp or fsdp:
        import torch.distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
        # Batch-norm statistics go over their own group, so their collectives
        # never interleave with the gradients' (DDP buckets, FSDP shards).
        _global_batchnorm(model, dist.new_group())
        if fsdp:
            from torch.distributed.fsdp import fully_shard

            fully_shard(model.features)
            fully_shard(model.classifier)
            net = fully_shard(model)
        else:
            from torch.nn.parallel import DistributedDataParallel

            net = DistributedDataParallel(model)
        ddp = True  # from here on: this rank's share of each batch
    opt = make_optimizer(optimizer, net.parameters())
    if compile:
        # Shares the parameters and buffers; train and eval each get a graph.
        net = torch.compile(net, backend="tpu" if device.type == "tpu" else "inductor")
    x_train, y_train = x_train.to(device), y_train.to(device)
    x_test, y_test = x_test.to(device), y_test.to(device)

    n = len(y_train)
    steps = math.ceil(n / batch_size)
    order = torch.Generator().manual_seed(seed + 1)
    result = TrainResult(steps_per_epoch=steps)
    for epoch in range(epochs):
        start = time.perf_counter()
        # One gather per epoch on the device; batches are then slices of it.
        perm = torch.randperm(n, generator=order).to(device)
        xs, ys = x_train.index_select(0, perm), y_train.index_select(0, perm)
        total = torch.zeros((), device=device)
        bar = tqdm(range(steps), desc=f"epoch {epoch + 1}/{epochs}", leave=False,
                   disable=not progress, unit="step")
        for step in bar:
            lo = step * batch_size
            full = min(batch_size, n - lo)
            if ddp:  # this rank's share of the batch
                lo, hi = lo + full * rank // world, lo + full * (rank + 1) // world
            else:
                hi = lo + full
            xb, yb = xs[lo:hi], ys[lo:hi]
            if ddp:
                # The sum over this rank's share, scaled so that DDP's average of
                # the ranks' gradients is the gradient of the whole batch's mean.
                loss = F.cross_entropy(net(xb), yb, reduction="sum") * (world / full)
            else:
                loss = F.cross_entropy(net(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total = total + loss.detach() * (len(yb) if not ddp else full / world)
        if ddp:
            dist.all_reduce(total)
        epoch_loss = total.item() / n  # the steps never wait; the epoch waits here
        result.epoch_seconds.append(time.perf_counter() - start)
        bar.close()
        result.losses.append(epoch_loss)
        # Rank 0 evaluates alone; the others wait at the next step's collective.
        if fsdp:  # every rank runs the forward: it gathers the parameters
            accuracy = evaluate(net, x_test, y_test)
            result.accuracies.append(accuracy if rank == 0 else 0.0)
        else:
            result.accuracies.append(evaluate(net if not ddp else model, x_test, y_test)
                                     if rank == 0 else 0.0)
        if log is not None and rank == 0:
            log(f"epoch {epoch + 1}/{epochs}: loss {epoch_loss:.6f}  "
                f"test accuracy {result.accuracies[-1]:.4f}  "
                f"({result.epoch_seconds[-1]:.2f} s)")
    result.final_accuracy = result.accuracies[-1] if result.accuracies else 0.0
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", help="tpu (default) or cpu")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--optimizer", choices=("sgd", "adamw"), default="sgd")
    p.add_argument("--mode", choices=("strict", "debug", "fused"), default=None,
                   help="torchtpu eager mode (default: TORCHTPU_EAGER_MODE or strict)")
    p.add_argument("--compile", action="store_true",
                   help='torch.compile the model (backend "tpu"; "inductor" on CPU)')
    p.add_argument("--ddp", action="store_true",
                   help="DistributedDataParallel over torchrun's processes, one tpu each")
    p.add_argument("--fsdp", action="store_true",
                   help="FSDP2 (fully_shard) over torchrun's processes, one tpu each")
    p.add_argument("--spmd", type=int, metavar="N",
                   help="data parallel over N tpu devices of this process (torchtpu.spmd)")
    args = p.parse_args(argv)
    if args.spmd:
        return _main_spmd(args)
    rank = 0
    distributed = args.ddp or args.fsdp
    if distributed:
        import os

        import torch.distributed as dist

        dist.init_process_group()  # gloo for CPU tensors, "tpu" for tpu tensors
        rank = dist.get_rank()
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if args.device == "tpu" and torchtpu.device.device_count() > 1:
            args.device = f"tpu:{local}"  # several devices per process: one each
            torch.tpu.set_device(local)
    try:
        result = train(args.device, args.epochs, args.seed, args.batch_size, args.optimizer,
                       args.mode, progress=rank == 0, compile=args.compile, ddp=args.ddp,
                       fsdp=args.fsdp)
    finally:
        if distributed:
            dist.destroy_process_group()
    if rank != 0:
        return result
    print(f"final test accuracy: {result.final_accuracy:.4f} on {args.device}")
    if torch.device(args.device).type == "tpu":
        fallbacks = torchtpu.metrics.fallback_counts()
        if fallbacks:
            print(f"ops that ran on CPU (fallback): {fallbacks}")
    return result


def _main_spmd(args):
    import os

    from torchtpu import _C
    from torchtpu.examples.train_digits_spmd import train_spmd

    if args.device != "tpu" or args.optimizer != "sgd" or args.ddp or args.fsdp or args.compile:
        raise SystemExit("--spmd trains on tpu with SGD, without --ddp/--fsdp/--compile")
    if not _C._is_initialized() and not os.environ.get("TORCHTPU_CPU_DEVICES"):
        torchtpu.init(cpu_devices=args.spmd)  # the CPU plugin's device count; others ignore it
    if torch.tpu.device_count() < args.spmd:
        raise SystemExit(f"--spmd {args.spmd}: this process has {torch.tpu.device_count()} "
                         "tpu devices")
    result = TrainResult(steps_per_epoch=math.ceil(1437 / args.batch_size))
    result.losses, result.accuracies, result.epoch_seconds = train_spmd(
        DigitsCNN, load_data(args.seed), args.spmd, args.epochs, args.seed, args.batch_size)
    result.final_accuracy = result.accuracies[-1]
    print(f"final test accuracy: {result.final_accuracy:.4f} on {args.spmd} tpu devices (spmd)")
    return result


if __name__ == "__main__":
    main()
