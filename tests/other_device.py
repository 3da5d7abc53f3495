"""Another device on a machine that has only a CPU: where a GPU would catch a stray device, so does this.

Inside ``on_another_device()``, the ``meta`` device stands for an accelerator: ``module.to("meta")``, ``x.to("meta")``
and any factory given ``device="meta"`` (or ``device=x.device`` of such a tensor) make an :class:`Elsewhere` tensor,
which reports the ``meta`` device and holds the real numbers on the CPU behind it, so that everything computes as it
would (losses, ``.item()``, boolean masks, optimiser steps). Every aten operation is checked as a GPU checks it: an
operation that mixes a tensor on the other device with a CPU tensor of one dimension or more fails (a CPU scalar
tensor is allowed, as CUDA allows it); indexing a tensor on the other device with CPU indices is allowed, indexing a
CPU tensor with indices on the other device is not; copies across devices (``.to``, ``copy_``) are allowed; a CPU
random generator given for a tensor on the other device fails; ``.numpy()`` of a tensor there fails. A tensor the
model makes without a device (``torch.zeros(b)``) is therefore on the CPU, and the first operation that mixes it with
the model's fails with the operation's name, as ``Expected all tensors to be on the same device`` does on a GPU.

Honest about what it is not: no kernel of another backend runs (CUDA's numerics, its memory, autocast's bfloat16), and
a real ``meta`` tensor (no data) made inside the block is an error, not the other device.

Example:
    >>> with on_another_device():
    ...     layer = torch.nn.Linear(3, 2).to(OTHER)
    ...     layer(torch.ones(4, 3).to(OTHER)).sum().backward()
    ...     layer(torch.ones(4, 3))                                 # a CPU input: refused  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode  # torch's documented home of dispatch modes

OTHER = torch.device("meta")
aten = torch.ops.aten

# operations whose tensors may lie on two devices (a copy across them)
CROSS = {aten.copy_.default, aten._to_copy.default, aten._copy_from.default, aten._copy_from_and_resize.default}
# operations whose index tensors may stay on the CPU while the indexed tensor is elsewhere (not the other way round)
INDEXING = {aten.index.Tensor, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default,
            aten._unsafe_index.Tensor, aten._unsafe_index_put.default}


class StrayDevice(RuntimeError):
    """An operation mixed the other device with the CPU (what a GPU refuses)."""


class Elsewhere(torch.Tensor):
    """A tensor on the other device (:data:`OTHER`), its numbers held on the CPU (``elem``)."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        out = torch.Tensor._make_wrapper_subclass(cls, elem.size(), strides=elem.stride(),
                                                  storage_offset=elem.storage_offset(), dtype=elem.dtype,
                                                  layout=elem.layout, device=OTHER, requires_grad=elem.requires_grad)
        out.elem = elem.detach()
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl

    def tolist(self):  # a GPU tensor's tolist() copies to the host
        return self.elem.tolist()

    def numpy(self, *, force: bool = False):
        raise TypeError("can't convert a tensor on the other device to numpy (as with cuda): use Tensor.cpu() first")

    def __repr__(self) -> str:
        return f"Elsewhere({self.elem!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return run(func, args, kwargs or {})


def _flat(x) -> list:
    """The leaves of nested tuples, lists and dicts (an operation's arguments)."""
    if isinstance(x, (tuple, list)):
        return [leaf for item in x for leaf in _flat(item)]
    if isinstance(x, dict):
        return [leaf for item in x.values() for leaf in _flat(item)]
    return [x]


def _map(fn, x):
    """``fn`` on each tensor of nested tuples, lists and dicts."""
    if isinstance(x, (tuple, list)):
        return type(x)(_map(fn, item) for item in x)
    if isinstance(x, dict):
        return {k: _map(fn, v) for k, v in x.items()}
    return fn(x) if isinstance(x, torch.Tensor) else x


def _shapes(tensors) -> str:
    return ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in tensors)


def check(func, args: tuple, kwargs: dict) -> None:
    """Raise :class:`StrayDevice` where a GPU would refuse ``func`` on these arguments."""
    flat = _flat((args, kwargs))
    tensors = [t for t in flat if isinstance(t, torch.Tensor)]
    meta = [t for t in tensors if not isinstance(t, Elsewhere) and t.device.type == "meta"]
    if meta:
        raise StrayDevice(f"{func}: a real meta tensor (no data) reached the other device's check")
    there = [t for t in tensors if isinstance(t, Elsewhere)]
    generator = kwargs.get("generator")
    target = kwargs.get("device")
    elsewhere = (torch.device(target) == OTHER) if target is not None else bool(there)
    if generator is not None and elsewhere and generator.device.type != OTHER.type:
        raise StrayDevice(f"{func}: a {generator.device.type} generator for a tensor on the other device")
    if not there or func in CROSS:
        return
    if func in INDEXING:
        self, indices = args[0], [i for i in args[1] if i is not None]
        if not isinstance(self, Elsewhere) and any(isinstance(i, Elsewhere) for i in indices):
            raise StrayDevice(f"{func}: a CPU tensor {_shapes([self])} indexed by indices on the other device")
        rest = [self, *args[2:]]  # the indexed tensor and the values put: on one device (indices may be on the CPU)
        here = [t for t in rest if isinstance(t, torch.Tensor) and not isinstance(t, Elsewhere) and t.dim()]
    else:
        here = [t for t in tensors if not isinstance(t, Elsewhere) and t.dim()]  # 0-dim CPU: a scalar, allowed
    if here:
        raise StrayDevice(f"{func}: expected all tensors on one device, got tensors on the other device and CPU "
                          f"tensors of {_shapes(here)}")


def run(func, args: tuple, kwargs: dict):
    """``func`` checked (:func:`check`), then run on the numbers; outputs on the other device when it was asked for
    (``device=``) or, with no device asked, when an input was there."""
    check(func, args, kwargs)
    flat = _flat((args, kwargs))
    target = kwargs.get("device")
    there = (torch.device(target) == OTHER) if target is not None else any(isinstance(t, Elsewhere) for t in flat)
    args, kwargs = _map(lambda t: t.elem if isinstance(t, Elsewhere) else t, (args, kwargs))
    if target is not None and there:
        kwargs = {**kwargs, "device": torch.device("cpu")}
    out = func(*args, **kwargs)
    return _map(Elsewhere, out) if there else out


class _Dispatch(TorchDispatchMode):
    """Every aten operation of the block, the backward's too: a tensor asked for on the other device (``x.to``,
    ``module.to``, a factory's ``device=``) is made there; every operation is checked (:func:`run`)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return run(func, args, kwargs or {})


def _listed(index):
    """An index's Python lists as the CPU tensors they stand for (``x[:, [1, 2]]``)."""
    if isinstance(index, tuple):
        return tuple(_listed(i) for i in index)
    return torch.tensor(index) if isinstance(index, list) else index


class _FromData(TorchFunctionMode):
    """What builds its tensor below the dispatcher's modes: ``torch.tensor(data, device=OTHER)`` (made on the CPU
    here, then moved) and a Python list in an index of a tensor there (``x[:, [1, 2]]``: the list as a CPU index,
    which indexing allows)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if func in (torch.tensor, torch.as_tensor, torch.asarray) and device is not None and \
                torch.device(device) == OTHER:
            return func(*args, **{**kwargs, "device": "cpu"}).to(OTHER)
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and isinstance(args[0], Elsewhere):
            args = (args[0], _listed(args[1]), *args[2:])
        return func(*args, **kwargs)


@contextlib.contextmanager
def on_another_device():
    """The block runs with :data:`OTHER` standing for an accelerator (module docstring)."""
    with _FromData(), _Dispatch():
        yield OTHER


__all__ = ["OTHER", "Elsewhere", "StrayDevice", "check", "on_another_device", "run"]
