"""The digits CNN trained data-parallel over N tpu devices of ONE process with
``torchtpu.spmd``: ``python -m torchtpu.examples.train_digits --spmd N``.

Each step is ONE program over the N devices (``spmd.jit``): the batch is split
over the mesh's ``"data"`` axis, parameters, optimizer state and batch-norm
statistics are replicated, and XLA inserts the gradient and batch-norm
all-reduces. The step is a function of the whole batch (``torch.func``
gradients and the optimizer's update written functionally), so batch norm sees
the whole batch and the per-epoch losses equal the one-device run's to float32
rounding. A batch whose size the device count does not divide (an epoch's last)
runs replicated: every device computes it whole.
"""

import math
import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value

import torchtpu.spmd as spmd


def _sgd(p, g, buf, lr=0.02, momentum=0.9):
    """torch.optim.SGD's momentum step (dampening 0, no Nesterov): the buffer
    starts at the first gradient, as it does there (0 * momentum + g)."""
    buf = momentum * buf + g
    return p - lr * buf, buf


class _Step:
    """One training step as a function of tensors only (what spmd.jit takes)."""

    def __init__(self, model, names, buffer_names):
        self.model, self.names, self.buffer_names = model, names, buffer_names

    def __call__(self, x, y, total, *state):
        n, nb = len(self.names), len(self.buffer_names)
        params, bufs = list(state[:n]), list(state[n:2 * n])
        stats = [b.clone() for b in state[2 * n:2 * n + nb]]  # batch norm writes these

        def loss_fn(params, stats):  # stats: inputs, as grad needs for what it writes
            values = dict(zip(self.names, params))
            values.update(zip(self.buffer_names, stats))
            return F.cross_entropy(functional_call(self.model, values, (x,)), y)

        grads, loss = grad_and_value(loss_fn)(params, stats)
        new = [_sgd(p, g, b) for p, g, b in zip(params, grads, bufs)]
        return (*[p for p, _ in new], *[b for _, b in new], *stats,
                total + loss * x.shape[0])


def train_spmd(model_cls, data, devices, epochs, seed, batch_size, log=print):
    """Trains ``model_cls()`` (built on CPU from ``seed``) with SGD over
    ``devices`` tpu devices; returns ``(losses, accuracies, epoch_seconds)``.
    ``data``: ``(x_train, y_train, x_test, y_test)`` CPU tensors."""
    x_train, y_train, x_test, y_test = data
    torch.manual_seed(seed)
    model = model_cls()
    mesh = spmd.Mesh(list(range(devices)), axis_names=("data",))
    names = [n for n, _ in model.named_parameters()]
    buffer_names = [n for n, _ in model.named_buffers()]

    def replicated(t):
        return spmd.mark_sharding(t.detach(), mesh, (None,) * t.dim())

    params = [replicated(p) for _, p in model.named_parameters()]
    bufs = [replicated(torch.zeros_like(p)) for _, p in model.named_parameters()]
    stats = [replicated(b) for _, b in model.named_buffers()]
    out_specs = tuple((None,) * p.dim() for p in params) * 2 + tuple(
        (None,) * b.dim() for b in stats) + ((),)
    step = spmd.jit(_Step(model, names, buffer_names), out_specs=out_specs)

    def evaluate(params, stats, x):
        values = dict(zip(names, params))
        values.update(zip(buffer_names, stats))
        model.eval()
        try:
            return functional_call(model, values, (x,)).argmax(1)
        finally:
            model.train()

    predict = spmd.jit(lambda x, *s: evaluate(s[:len(names)], s[len(names):], x))
    n = len(y_train)
    steps = math.ceil(n / batch_size)
    order = torch.Generator().manual_seed(seed + 1)
    losses, accuracies, seconds = [], [], []
    for epoch in range(epochs):
        start = time.perf_counter()
        perm = torch.randperm(n, generator=order)
        xs, ys = x_train[perm], y_train[perm]
        total = replicated(torch.zeros(()))
        for s in range(steps):
            batch = slice(s * batch_size, (s + 1) * batch_size)
            xb, yb = xs[batch], ys[batch]
            split = len(yb) % devices == 0
            xb = spmd.mark_sharding(xb, mesh, ("data" if split else None, None, None, None))
            yb = spmd.mark_sharding(yb, mesh, ("data" if split else None,))
            out = step(xb, yb, total, *params, *bufs, *stats)
            k = len(params)
            params, bufs = list(out[:k]), list(out[k:2 * k])
            stats, total = list(out[2 * k:2 * k + len(stats)]), out[-1]
        losses.append(float(total.cpu()) / n)  # the epoch's one read
        seconds.append(time.perf_counter() - start)
        labels = predict(spmd.mark_sharding(x_test, mesh, (None,) * 4), *params, *stats)
        accuracies.append((labels.cpu() == y_test).sum().item() / len(y_test))
        if log is not None:
            log(f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.6f}  test accuracy "
                f"{accuracies[-1]:.4f}  ({seconds[-1]:.2f} s, {devices} devices, one program "
                "per step)")
    return losses, accuracies, seconds
