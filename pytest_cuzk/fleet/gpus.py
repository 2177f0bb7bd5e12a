"""GPU models as vast.ai and NVML both spell them, with their memory: one table for every match.

vast.ai writes ``H100 SXM``, ``Tesla V100``, ``Q RTX 8000`` and ``RTX 6000Ada``; NVML, on the
machine itself, ``NVIDIA H100 80GB HBM3``, ``Tesla V100-SXM2-16GB``, ``Quadro RTX 8000`` and
``NVIDIA RTX 6000 Ada Generation``. A model's key is its name in ``MODELS`` and its memory in
GB: a 40 GB and an 80 GB A100 prove differently and must not pool. The memory comes from the
name where it says it, else from the card's reported size, snapped to the sizes the model is sold in.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from pytest_cuzk.vocab.units import GIB

__all__ = ["MODELS", "GpuKey", "gpu_key", "matches"]

# model -> (its words after ``_words``, as a regex over them; the memory sizes it is sold in, GB).
# First match wins: variants (``RTX 4090 D``, ``L40S``) are told apart by the whole-name match.
MODELS: dict[str, tuple[str, tuple[int, ...]]] = {
    "H100 SXM": (r"h 100( sxm( \d)?)?", (80,)),  # NVML says only "H100 80GB HBM3" for the SXM part
    "H100 PCIe": (r"h 100 pcie", (80,)),
    "H100 NVL": (r"h 100 nvl", (94,)),
    "H200": (r"h 200( sxm( \d)?)?", (141,)),
    "A100 SXM4": (r"a 100 sxm( 4)?", (40, 80)),
    "A100 PCIe": (r"a 100 pcie", (40, 80)),
    "V100": (r"v 100( sxm \d| pcie)?", (16, 32)),  # vast.ai says only "Tesla V100"
    "RTX 5090": (r"rtx 5090", (32,)),
    "RTX 4090": (r"rtx 4090", (24,)),
    "RTX 4090 D": (r"rtx 4090 d", (24,)),
    "RTX 3090": (r"rtx 3090", (24,)),
    "L40S": (r"l 40 s", (48,)),
    "L40": (r"l 40", (48,)),
    "L4": (r"l 4", (24,)),
    "A40": (r"a 40", (48,)),
    "RTX A6000": (r"(rtx )?a 6000", (48,)),
    "RTX 6000 Ada": (r"rtx 6000 ada", (48,)),
    "Quadro RTX 8000": (r"rtx 8000", (48,)),  # vast.ai: "Q RTX 8000"
    "Quadro RTX 6000": (r"rtx 6000", (24,)),
}
_COMPILED = [(name, re.compile(rf"{words}$"), sizes) for name, (words, sizes) in MODELS.items()]
_VENDOR = re.compile(r"\b(nvidia|geforce|tesla|quadro|q|generation|hbm\d*e?)\b")
_MEMORY = re.compile(r"(\d+)\s*gb\b")


class GpuKey(NamedTuple):
    """A GPU model and its memory in GB (None where neither its name nor a size tells)."""

    model: str
    memory_gb: int | None

    def __str__(self) -> str:
        return self.model if self.memory_gb is None else f"{self.model} {self.memory_gb}GB"


def _words(name: str) -> tuple[str, int | None]:
    """The name's words (vendor words and memory left out, letters and digits apart), and its GB."""
    text = name.lower().replace("_", " ")
    memory = _MEMORY.search(text)
    text = _VENDOR.sub(" ", _MEMORY.sub(" ", text))
    return " ".join(re.findall(r"[a-z]+|\d+", text)), int(memory.group(1)) if memory else None


def _snap(mem_bytes: int | None, sizes: tuple[int, ...]) -> int | None:
    if len(sizes) == 1:
        return sizes[0]
    if mem_bytes is None:
        return None
    return min(sizes, key=lambda gb: abs(gb - mem_bytes / GIB))


def gpu_key(name: str, mem_bytes: int | None = None) -> GpuKey:
    """The key of a GPU named ``name`` with ``mem_bytes`` of memory (per GPU; optional)."""
    words, named_gb = _words(name)
    for model, pattern, sizes in _COMPILED:
        if pattern.match(words):
            return GpuKey(model, _snap(named_gb * GIB if named_gb else mem_bytes, sizes))
    unknown_gb = named_gb or (None if mem_bytes is None else round(mem_bytes / GIB))
    return GpuKey(words.upper(), unknown_gb)


def matches(query: str, name: str, mem_bytes: int | None = None) -> bool:
    """Whether ``--gpu QUERY`` (``RTX_4090``, ``a40``, ``A100 80GB``) names the GPU ``name``.

    The query's words must appear whole in the model's name or in the name as written, so
    ``a40`` is not an ``RTX A4000``; memory in the query must equal the GPU's.
    """
    words, gb = _words(query)
    key = gpu_key(name, mem_bytes)
    if gb is not None and key.memory_gb != gb:
        return False
    return any(f" {words} " in f" {w} " for w in (_words(key.model)[0], _words(name)[0]))
