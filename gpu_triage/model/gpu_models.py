"""The GPU model a product name or a node label names, in one spelling (guide/T11: "pods
landing on the wrong node type").

The same GPU is spelled many ways: NVML and nvidia-smi print ``NVIDIA H100 80GB HBM3``,
GPU feature discovery labels the node ``nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3``,
GKE ``cloud.google.com/gke-accelerator=nvidia-h100-80gb``, EKS
``k8s.amazonaws.com/accelerator=nvidia-tesla-v100``, and sites write their own
``gpu-type=h100``. ``gpu_model`` reduces each to its model token (``h100``), so a pod's
selector can be compared with the GPUs the node really has. Only the model is compared:
variants of one model (memory size, SXM or PCIe, NVL) read as the same model, so a
mismatch is never claimed where the label is merely less precise than the product name.
A value that names no model (``gpu=true``, ``large``) gives None: nothing is compared.
"""

from __future__ import annotations

import re

# A model token: letters then digits (h100, a100, gh200, gb200, b200, l40s, a10g, t4,
# v100, a6000, rtx 4090 -> 4090 after rtx/gtx/quadro) . Memory sizes (80gb), form factors
# (sxm4, pcie), memory kinds (hbm3) and vendor words are not models.
_MODEL = re.compile(r"^[a-z]{1,3}\d{1,4}[a-z]?$")
_NOT_MODEL = re.compile(r"^(?:\d+gb|sxm\d*|pcie\d*|hbm\d*e?|nvl\d*|gen\d+|x\d+|mig\d*|g\d+gb)$")
_VENDOR = {"nvidia", "tesla", "geforce", "quadro", "rtx", "gtx", "tegra", "gpu", "nv"}
_SERIES = {"rtx", "gtx", "quadro", "titan"}  # "RTX 4090": the number alone is the model


def gpu_model(text: str | None) -> str | None:
    """``NVIDIA H100 80GB HBM3`` / ``NVIDIA-H100-80GB-HBM3`` / ``nvidia-tesla-a100`` ->
    ``h100`` / ``h100`` / ``a100``; None when the text names no GPU model."""
    if not text or len(text) > 200:
        return None
    tokens = [t for t in re.split(r"[^a-z0-9]+", text.lower()) if t]
    prev = ""
    for tok in tokens:
        if tok in _VENDOR or _NOT_MODEL.match(tok):
            prev = tok
            continue
        if _MODEL.match(tok):
            return tok
        if tok.isdigit() and len(tok) == 4 and prev in _SERIES:
            return f"{prev}{tok}"
        prev = tok
    return None


# Node label keys that name the GPU model a node has (and that pods select on).
GPU_TYPE_LABELS = (
    "nvidia.com/gpu.product",  # GPU feature discovery (from NVML)
    "cloud.google.com/gke-accelerator",
    "k8s.amazonaws.com/accelerator",
    "accelerator",
)
# A site's own label: gpu, gpu-type, gpu_type, gpu.model, example.com/gpu-product ...
_CUSTOM_GPU_LABEL = re.compile(
    r"^(?:[a-z0-9.-]+/)?(?:gpu|accelerator)(?:[._-]?(?:type|model|product|class|kind|name))?$"
)
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")


def is_gpu_type_label(key: str) -> bool:
    """A label key that names a GPU type (GFD's product, a cloud's accelerator, a site's)."""
    k = key.strip().lower()
    return k in GPU_TYPE_LABELS or _CUSTOM_GPU_LABEL.match(k) is not None


def gpu_type_wanted(selector: dict[str, str]) -> tuple[str, str] | None:
    """(label, value) of the first term of a node selector that names a GPU model."""
    for key in sorted(selector, key=lambda k: (k not in GPU_TYPE_LABELS, k)):
        if is_gpu_type_label(key) and gpu_model(selector[key]):
            return key, selector[key]
    return None


def instance_type_wanted(selector: dict[str, str]) -> str | None:
    for key in INSTANCE_TYPE_LABELS:
        if selector.get(key):
            return selector[key]
    return None
