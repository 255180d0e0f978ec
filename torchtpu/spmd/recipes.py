"""Training recipes over a mesh: a model's AdamW step as ONE SPMD program
(docs/spmd.md, "Recipes").

    mesh = spmd.Mesh([0, 1, 2, 3], (2, 2), ("data", "model"))
    specs = spmd.recipes.param_specs(model, mesh, "2d")
    step = spmd.recipes.TrainStep(model, mesh, specs, batch_spec=("data", None))
    for ids in batches:
        loss = step(ids)              # a replicated 0-d ShardedTensor

The recipes, as PyTorch/XLA's SPMD guides and Megatron-LM lay them out:
``"dp"`` batch split over every device, parameters replicated; ``"fsdp"``
parameters and optimizer state split on their first dim over every device
(XLA gathers each where it is used); ``"tp"`` Megatron's column-parallel
(q/k/v, gate/up, GPT-2's c_attn/c_fc: output features split over
``"model"``; lm_head: the vocabulary, so the loss's log-sum-exp reduces over
a split dim) and row-parallel (o, down, c_proj: input features) linears, the
rest replicated; ``"2d"`` tp over
``"model"`` with the batch over ``"data"``.
"""

import torch

from torchtpu.spmd.program import jit
from torchtpu.spmd.tensor import mark_sharding

__all__ = ["TrainStep", "param_specs"]

# Megatron's layout by parameter name: (name parts, the weight dim split over
# "model"). nn.Linear weights are [out, in] (Llama-style names); transformers'
# Conv1D weights are [in, out] (GPT-2's c_attn, c_fc, c_proj).
_TP_RULES = (
    (("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "lm_head"), 0),  # column
    (("o_proj", "down_proj"), 1),                                            # row
    ((".c_attn.", ".c_fc."), 1),                                             # Conv1D column
    ((".c_proj.",), 0),                                                      # Conv1D row
)


def param_specs(model, mesh, recipe):
    """A partition spec per parameter name of ``model`` for ``recipe`` (``"dp"``,
    ``"fsdp"``, ``"tp"``, ``"2d"``; see the module docstring). ``"tp"`` and
    ``"2d"`` need an axis named ``"model"``; ``"fsdp"`` splits over all axes
    together (a parameter whose dims do not divide stays replicated).
    Raises ValueError for another recipe name or a missing axis."""
    every = tuple(mesh.axis_names)
    out = {}
    for name, p in model.named_parameters():
        spec = [None] * p.dim()
        if recipe == "fsdp":
            for d, size in enumerate(p.shape):
                if size % mesh.size == 0:
                    spec[d] = every
                    break
        elif recipe in ("tp", "2d"):
            mesh.axis("model")
            for parts, dim in _TP_RULES:
                if p.dim() == 2 and any(k in name for k in parts):
                    spec[dim] = "model"
                    break
        elif recipe != "dp":
            raise ValueError(f"param_specs: no recipe {recipe!r} (dp, fsdp, tp, 2d)")
        out[name] = tuple(spec)
    if recipe in ("tp", "2d") and not any(any(s) for s in out.values()):
        names = sorted(k.strip(".") for parts, _ in _TP_RULES for k in parts)
        raise ValueError(f"param_specs: no parameter of this model has a name the {recipe!r} "
                         f"recipe splits ({', '.join(names)}); give the specs yourself")
    return out


class TrainStep:
    """``model``'s training step with AdamW as ONE program over ``mesh``.

    The loss is ``model(input_ids, labels=labels).loss`` (a transformers
    causal LM; labels default to the inputs). Dropout must be off (random ops
    are not yet run over a mesh: NotImplementedError at the first call). Gradients come from
    ``torch.func.grad_and_value`` of ``torch.func.functional_call``; the update
    is ``torch.optim.AdamW``'s (decoupled weight decay, bias-corrected moments,
    Loshchilov & Hutter 2019), so 5 steps equal ``torch.optim.AdamW`` on one
    device within float32 rounding. Parameters, both moments and the step
    count stay on the mesh between calls (``params_specs`` lays the first
    three out); each call is one PJRT execute over the mesh, no host bytes.

    Args:
        model: a module on CPU or tpu (its values are copied onto the mesh;
            the module itself is read for structure and buffers only).
        mesh: the :class:`~torchtpu.spmd.Mesh`.
        param_specs: parameter name -> partition spec (see :func:`param_specs`).
        batch_spec: the spec of ``input_ids`` ([batch, sequence]).
        lr, betas, eps, weight_decay: AdamW's, as ``torch.optim.AdamW``.
    """

    def __init__(self, model, mesh, param_specs, batch_spec=(None, None), lr=1e-3,
                 betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.model, self.mesh, self.batch_spec = model, mesh, tuple(batch_spec)
        self.hyper = (lr, betas[0], betas[1], eps, weight_decay)
        named = list(model.named_parameters())
        self.names = [n for n, _ in named]
        specs = [tuple(param_specs[n]) for n in self.names]
        self.buffer_names = [n for n, _ in model.named_buffers()]
        self.params = [mark_sharding(p.detach(), mesh, s) for (_, p), s in zip(named, specs)]
        self.exp_avg = [mark_sharding(torch.zeros_like(p.detach()), mesh, s)
                        for (_, p), s in zip(named, specs)]
        self.exp_avg_sq = [mark_sharding(torch.zeros_like(p.detach()), mesh, s)
                           for (_, p), s in zip(named, specs)]
        self.buffers = [mark_sharding(b.detach(), mesh, (None,) * b.dim())
                        for _, b in model.named_buffers()]
        self.step_count = mark_sharding(torch.zeros((), dtype=torch.float32), mesh, ())
        self._jit = jit(self._step, out_specs=(*specs, *specs, *specs, (), ()))

    def _loss(self, params, buffers, ids, labels):
        from torch.func import functional_call
        values = dict(zip(self.names, params))
        values.update(zip(self.buffer_names, buffers))
        return functional_call(self.model, values, (ids,), {"labels": labels}).loss

    def _step(self, t, ids, labels, *state):
        from torch.func import grad_and_value
        n, nb = len(self.names), len(self.buffer_names)
        params, m, v = list(state[:n]), list(state[n:2 * n]), list(state[2 * n:3 * n])
        buffers = list(state[3 * n:3 * n + nb])
        grads, loss = grad_and_value(self._loss)(params, buffers, ids, labels)
        lr, b1, b2, eps, wd = self.hyper
        t = t + 1
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        new_p, new_m, new_v = [], [], []
        for p, g, mm, vv in zip(params, grads, m, v):
            mm = b1 * mm + (1 - b1) * g
            vv = b2 * vv + (1 - b2) * g * g
            denom = torch.sqrt(vv) / torch.sqrt(c2) + eps
            new_p.append(p * (1 - lr * wd) - (lr / c1) * mm / denom)
            new_m.append(mm)
            new_v.append(vv)
        return (*new_p, *new_m, *new_v, loss, t)

    def __call__(self, input_ids, labels=None):
        """One step on ``input_ids`` ([batch, sequence] int64, CPU or tpu, or a
        ShardedTensor of ``batch_spec``). Returns the loss before the update."""
        ids = mark_sharding(input_ids, self.mesh, self.batch_spec) \
            if not hasattr(input_ids, "mesh") else input_ids
        lab = ids if labels is None else mark_sharding(labels, self.mesh, self.batch_spec)
        n = len(self.names)
        out = self._jit(self.step_count, ids, lab, *self.params, *self.exp_avg,
                        *self.exp_avg_sq, *self.buffers)
        self.params, self.exp_avg = list(out[:n]), list(out[n:2 * n])
        self.exp_avg_sq = list(out[2 * n:3 * n])
        loss, self.step_count = out[3 * n], out[3 * n + 1]
        return loss

    def state_dict(self):
        """Parameter name -> full value (a tpu tensor on the mesh's first device)."""
        return {n: p.full_tensor() for n, p in zip(self.names, self.params)}

    def param_bytes_per_device(self):
        """Bytes of parameters each device holds (its shards)."""
        return [sum(p.shards[d].numel() * p.element_size() for p in self.params)
                for d in range(self.mesh.size)]
