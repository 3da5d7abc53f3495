"""Make timm and transformers importable beside a torchvision built for another torch (docs/design.md section 7).

On this machine the only torchvision that pairs with the CPU torch 2.13 is a CUDA build; importing it
fails with "operator torchvision::nms does not exist" because its compiled ops do not load, and timm
and ``transformers.AutoModel`` import torchvision. Defining the op schemas (no kernels) lets the
Python side register its fake implementations and import. The C++ ops stay unusable; nothing here
needs them. Applied only when that exact error is raised.
"""

from __future__ import annotations

import sys

_SCHEMAS = [
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width, int sampling_ratio, "
    "bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels, "
    "SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) "
    "-> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width) "
    "-> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale, "
    "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, "
    "SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, "
    "SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, "
    "SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask, "
    "Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
    "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
]
_library = None  # keeps the op definitions alive


def ensure_torchvision_importable() -> None:
    """Import torchvision, defining its missing op schemas first if (and only if) that is what breaks it."""
    global _library
    try:
        import torchvision  # noqa: F401
        return
    except ImportError:
        return  # no torchvision at all: timm and transformers do without it
    except RuntimeError as err:
        if "operator torchvision::nms does not exist" not in str(err):
            raise
    import torch

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    _library = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        _library.define(schema)
    import torchvision  # noqa: F401,F811
