"""The spec's quantisation overrides (docs/spec/options.md 1): ``cli_estimate``'s
``gemm_quant_mode``, ``moe_quant_mode``, ``kvcache_quant_mode``,
``fmha_quant_mode`` and ``comm_quant_mode``, given to the Python path as an
``options`` dict (which also takes the memory knobs, `MEMORY_OPTIONS`)::

    estimate_agg(..., options={"kvcache_quant": "fp8", "gemm_quant": "fp8_block"})

Keys are the option names of `QUANT_OPTIONS`; a value is one of the spec's
enum member names (exact and case-sensitive, options.md 1.1), ``None`` (or
``""``, as the spec's truthiness test has it) keeps the checkpoint's mode.
An unknown key or mode name is malformed input: ValueError naming it (the
spec's unknown name is a ``KeyError``), always raised, never a reason.

What an override does is `StepContext.quants`' business (options.md 1.2):
explicit modes replace the checkpoint's inferred ones and are never changed
by a guard; they never trigger the checkpoint's "fp8 => fmha / kv fp8" rule;
an explicit fp8 FMHA is checked against the context table's fmha slices
(refused when the slices exist and none is fp8). ``comm`` only labels the
result on the estimate paths (options.md 1.3).
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

__all__ = [
    "QUANT_OPTIONS",
    "MEMORY_OPTIONS",
    "OPTIONS",
    "SPEC_MODES",
    "QuantOverrides",
    "quant_overrides",
    "NO_OVERRIDES",
    "MemoryOptions",
    "memory_options",
    "NO_MEMORY_OPTIONS",
    "memory_settings",
]

# option key -> (the PhaseQuants field it sets, the spec's member names in enum order)
SPEC_MODES: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "gemm_quant": ("gemm", ("bfloat16", "int8_wo", "int4_wo", "fp8", "fp8_static", "sq", "fp8_block", "fp8_ootb",
                            "nvfp4")),
    "moe_quant": ("moe", ("bfloat16", "fp8", "int4_wo", "fp8_block", "w4afp8", "nvfp4", "w4a16_mxfp4",
                          "w4a8_mxfp4_mxfp8", "w4a8_mxfp4_mxfp8_trtllm", "w4a16_mxfp4_cutlass")),
    "kvcache_quant": ("kvcache", ("bfloat16", "int8", "fp8")),
    "fmha_quant": ("fmha", ("bfloat16", "fp8", "fp8_block")),
    "comm_quant": ("comm", ("half", "int8", "fp8")),
}  # fmt: skip
QUANT_OPTIONS: Tuple[str, ...] = tuple(SPEC_MODES)
MEMORY_OPTIONS: Tuple[str, ...] = ("free_gpu_memory_fraction", "max_seq_len")
OPTIONS: Tuple[str, ...] = QUANT_OPTIONS + MEMORY_OPTIONS


class QuantOverrides(NamedTuple):
    """The modes a caller set (None: the checkpoint's). Hashable: part of the
    `StepContext` cache key."""

    gemm: Optional[str] = None
    moe: Optional[str] = None
    kvcache: Optional[str] = None
    fmha: Optional[str] = None
    comm: Optional[str] = None

    def is_empty(self) -> bool:
        return all(v is None for v in self)

    def given(self) -> Dict[str, str]:
        """The option keys the caller set, with their modes."""
        return {key: getattr(self, field) for key, (field, _) in SPEC_MODES.items() if getattr(self, field) is not None}


NO_OVERRIDES = QuantOverrides()


def quant_overrides(options) -> QuantOverrides:
    """`QuantOverrides` of an ``options`` argument (a dict or None); ValueError
    for anything else, an unknown key or an unknown mode name."""
    if options is None:
        return NO_OVERRIDES
    if isinstance(options, QuantOverrides):
        return options
    if not isinstance(options, dict):
        raise ValueError(f"options = {options!r} must be a dict of options ({', '.join(OPTIONS)}) or None")
    values: Dict[str, Optional[str]] = {}
    for key, value in options.items():
        if key in MEMORY_OPTIONS:
            _memory_value(key, value)  # validated here too: a bad value is refused wherever it is given
            continue
        spec = SPEC_MODES.get(key)
        if spec is None:
            raise ValueError(f"unknown option {key!r}; valid options: {', '.join(OPTIONS)}")
        field, names = spec
        if value is None or value == "":  # the spec: a falsy value is "not overridden"
            continue
        if not isinstance(value, str) or value not in names:
            raise ValueError(f"unknown {field} quant mode {value!r}; valid modes: {', '.join(names)}")
        values[field] = value
    return QuantOverrides(**values)


class MemoryOptions(NamedTuple):
    """The memory knobs a caller set (None: the backend's default)."""

    # the value as given (int or float): the KV warning prints str() of it
    free_gpu_memory_fraction: Optional[float] = None
    max_seq_len: Optional[int] = None

    def is_empty(self) -> bool:
        return self.free_gpu_memory_fraction is None and self.max_seq_len is None


NO_MEMORY_OPTIONS = MemoryOptions()


def _memory_value(key: str, value):
    """A memory knob's value (None when unset); ValueError when malformed."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    if key == "free_gpu_memory_fraction":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"option free_gpu_memory_fraction = {value!r} is not a number")
        if not 0 < value <= 1:  # NaN fails too
            raise ValueError(f"option free_gpu_memory_fraction = {value!r} must be in (0, 1]")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"option max_seq_len = {value!r} is not an integer")
    if value < 1:
        raise ValueError(f"option max_seq_len = {value!r} must be a positive integer")
    return value


def memory_options(options) -> MemoryOptions:
    """`MemoryOptions` of an ``options`` argument (a dict or None); the quant
    keys are `quant_overrides`' business (not checked here); ValueError for
    a malformed value."""
    if options is None:
        return NO_MEMORY_OPTIONS
    if isinstance(options, MemoryOptions):
        return options
    if not isinstance(options, dict):
        raise ValueError(f"options = {options!r} must be a dict of options ({', '.join(OPTIONS)}) or None")
    return MemoryOptions(**{key: _memory_value(key, options.get(key)) for key in MEMORY_OPTIONS})


def memory_settings(settings: Dict[str, str]) -> MemoryOptions:
    """`MemoryOptions` of session settings (strings; '' = unset): a fraction
    parses as a float, max_seq_len as an integer."""
    values = {}
    for key in MEMORY_OPTIONS:
        text = settings.get(key)
        if text is None or (isinstance(text, str) and text.strip() == ""):
            continue
        if isinstance(text, str):
            try:
                text = float(text) if key == "free_gpu_memory_fraction" else int(text.strip())
            except ValueError:
                what = "a number" if key == "free_gpu_memory_fraction" else "an integer"
                raise ValueError(f"setting {key} = {settings.get(key)!r} is not {what}") from None
        values[key] = text
    return memory_options(values)
