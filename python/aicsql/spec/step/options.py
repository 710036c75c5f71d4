"""The spec's user-facing options (docs/spec/options.md), given to the Python
path as an ``options`` dict::

    estimate_agg(..., options={"kvcache_quant": "fp8", "nextn": 2, "nextn_accepted": 1.4})

or, in the bridge's batch forms, as the session settings ``aic.<key>``
(strings; '' = unset). The keys (`OPTIONS`):

* the quantisation overrides (options.md 1; `QUANT_OPTIONS`): ``cli_estimate``'s
  ``gemm_quant_mode`` ... ``comm_quant_mode``. A value is one of the spec's
  enum member names (exact and case-sensitive, options.md 1.1); ``None`` (or
  ``""``, as the spec's truthiness test has it) keeps the checkpoint's mode.
* the memory knobs (options.md 3; `MEMORY_OPTIONS`): ``free_gpu_memory_fraction``
  (a number in (0, 1]) and ``max_seq_len`` (an integer >= 1).
* MTP speculative decoding (options.md 2; `MTP_OPTIONS`): ``nextn``, the draft
  depth (an integral number >= 0, or ``'auto'``: the checkpoint's
  ``num_nextn_predict_layers``), and ``nextn_accepted``, the average number of
  accepted draft tokens per decode step (a number; required, within
  ``[0, nextn]``, by the serving estimates once the depth is > 0, ignored at
  depth 0). The step functions take ``nextn`` only (`step_options`): the
  acceptance projection is the serving estimates' (options.md 2.4).
* images for the vision-language models (options.md 4; `IMAGE_OPTIONS`):
  ``image_height`` and ``image_width`` (integers from 0 to 65,536 pixels,
  default 0: no image), ``num_images`` (an integer from 0 to 1,024 per
  request, default 1) and
  ``enable_encoder_dp`` (a bool, default True: the vision encoder runs as data
  parallel replicas over the tp ranks, False: sharded like the LLM). Only the
  serving estimates take them (a step prices no encoder phase), and only
  Qwen3-VL reads them: every other model ignores them, as the spec does.

Everything is parsed in one place (`parse_options`; the settings through
`settings_options`), so a bad value is refused wherever it is given. An
unknown key or mode name, a value of the wrong type or range is malformed
input: ValueError naming it (the spec's unknown mode name is a ``KeyError``),
always raised, never a reason. The nextn texts are the spec's own
(options.md 2.2 / 5), since they are its ValueErrors.

What an override does is `StepContext.quants`' business (options.md 1.2):
explicit modes replace the checkpoint's inferred ones and are never changed
by a guard; they never trigger the checkpoint's "fp8 => fmha / kv fp8" rule;
an explicit fp8 FMHA is checked against the context table's fmha slices
(refused when the slices exist and none is fp8). ``comm`` only labels the
result on the estimate paths (options.md 1.3). What nextn does to a step is
`StepContext`'s (options.md 2.3), the projection the serving estimates'
(`aicsql.spec.serving.speculative`).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, NamedTuple, Optional, Tuple, Union

__all__ = [
    "QUANT_OPTIONS",
    "MEMORY_OPTIONS",
    "MTP_OPTIONS",
    "IMAGE_OPTIONS",
    "DISAGG_OPTIONS",
    "OPTIONS",
    "SPEC_MODES",
    "QuantOverrides",
    "NO_OVERRIDES",
    "MemoryOptions",
    "NO_MEMORY_OPTIONS",
    "MtpOptions",
    "NO_MTP",
    "ImageOptions",
    "NO_IMAGES",
    "Options",
    "NO_OPTIONS",
    "draft_length",
    "given_image_options",
    "parse_options",
    "step_options",
    "refuse_decode_system",
    "settings_options",
    "quant_overrides",
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
MTP_OPTIONS: Tuple[str, ...] = ("nextn", "nextn_accepted")
IMAGE_OPTIONS: Tuple[str, ...] = ("image_height", "image_width", "num_images", "enable_encoder_dp")
#: The disaggregated estimate's own options: the decode workers' system.
DISAGG_OPTIONS: Tuple[str, ...] = ("decode_system",)
OPTIONS: Tuple[str, ...] = QUANT_OPTIONS + MEMORY_OPTIONS + MTP_OPTIONS + IMAGE_OPTIONS + DISAGG_OPTIONS
AUTO = "auto"


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


class MemoryOptions(NamedTuple):
    """The memory knobs a caller set (None: the backend's default)."""

    # the value as given (int or float): the KV warning prints str() of it
    free_gpu_memory_fraction: Optional[float] = None
    max_seq_len: Optional[int] = None

    def is_empty(self) -> bool:
        return self.free_gpu_memory_fraction is None and self.max_seq_len is None


NO_MEMORY_OPTIONS = MemoryOptions()


class MtpOptions(NamedTuple):
    """The MTP options a caller set: the draft depth (an int >= 0, or 'auto'
    until the checkpoint resolves it) and the accepted draft tokens per step
    (the number as given -- the spec's message prints it --, None: not given)."""

    nextn: Union[int, str] = 0
    accepted: Optional[float] = None

    def accepted_at(self, nextn: int) -> float:
        """The accepted draft tokens per step at the resolved depth `nextn` (the
        spec's ``normalize_speculative_decoding``, options.md 2.2 item 2): 0.0
        at depth 0, whatever was given (the spec ignores it there); else it is
        required and must be finite and within ``[0, nextn]`` (ValueError with
        the spec's texts)."""
        if nextn <= 0:
            return 0.0
        if self.accepted is None:
            raise ValueError(
                f"nextn={nextn} requires 'nextn_accepted' (average accepted draft tokens per step, 0 <= "
                "nextn_accepted <= nextn); there is no built-in acceptance assumption."
            )
        accepted = float(self.accepted)
        if not math.isfinite(accepted) or not 0 <= accepted <= nextn:
            raise ValueError(f"nextn_accepted ({self.accepted}) must be within [0, nextn={nextn}].")
        return accepted


NO_MTP = MtpOptions()


class ImageOptions(NamedTuple):
    """The image options of a call, defaults as ``cli_estimate``'s
    (options.md 4.1). The spec validates none of them; aicsql refuses values
    of the wrong type or below 0, and a height or width of 0 (or images per
    request 0) simply means no image, as in the spec."""

    height: int = 0
    width: int = 0
    num_images: int = 1
    encoder_dp: bool = True


NO_IMAGES = ImageOptions()


class Options(NamedTuple):
    """Every option of one call, parsed (`parse_options`)."""

    quant: QuantOverrides = NO_OVERRIDES
    memory: MemoryOptions = NO_MEMORY_OPTIONS
    mtp: MtpOptions = NO_MTP
    images: ImageOptions = NO_IMAGES
    #: The decode workers' system of a disaggregated deployment (the spec's
    #: ``decode_system_name``; '': the prefill's), docs/spec/experiments.md 1.
    decode_system: str = ""


NO_OPTIONS = Options()


# ---- one value each --------------------------------------------------------------------------


def _unset(value) -> bool:
    return value is None or (isinstance(value, str) and value == "")


def _quant_mode(key: str, value) -> Optional[str]:
    """A quant option's mode name (None: the checkpoint's)."""
    if _unset(value):  # the spec: a falsy value is "not overridden"
        return None
    field, names = SPEC_MODES[key]
    if not isinstance(value, str) or value not in names:
        raise ValueError(f"unknown {field} quant mode {value!r}; valid modes: {', '.join(names)}")
    return value


def _fraction(value) -> Optional[float]:
    if _unset(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"option free_gpu_memory_fraction = {value!r} is not a number")
    if not 0 < value <= 1:  # NaN fails too
        raise ValueError(f"option free_gpu_memory_fraction = {value!r} must be in (0, 1]")
    return value


def _max_seq_len(value) -> Optional[int]:
    if _unset(value):
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"option max_seq_len = {value!r} is not an integer")
    if value < 1:
        raise ValueError(f"option max_seq_len = {value!r} must be a positive integer")
    return value


def draft_length(value) -> Union[int, str]:
    """The MTP draft depth: 'auto' as is, else the spec's ``validate_nextn``
    (options.md 2.2): an integral number (bool and strings are not), >= 0;
    None / '' is 0. The texts print the value as given."""
    if _unset(value):
        return 0
    if value == AUTO:
        return AUTO
    integral = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer())  # fmt: skip
    if not integral:
        raise ValueError(f"nextn ({value}) must be an integer draft length.")
    if value < 0:
        raise ValueError(f"nextn ({value}) must be >= 0.")
    return int(value)


def _accepted(value) -> Optional[float]:
    """nextn_accepted as given: a number (its range depends on the resolved
    depth, `MtpOptions.accepted_at`); None / '' is not given."""
    if _unset(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"option nextn_accepted = {value!r} is not a number")
    return value


#: The largest image side (pixels) and images per request priced, as on the
#: Rust path: far beyond any vision model's input, small enough that no token
#: count overflows.
MAX_IMAGE_SIDE = 1 << 16
MAX_IMAGES = 1 << 10


def _image_count(key: str, value) -> Optional[int]:
    """An image size in pixels (0 to `MAX_IMAGE_SIDE`) or the images per
    request (0 to `MAX_IMAGES`): an integer (integral floats and bools are
    not, as for ``max_seq_len``); None / '' is not given."""
    if _unset(value):
        return None
    limit = MAX_IMAGES if key == "num_images" else MAX_IMAGE_SIDE
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ValueError(f"option {key} = {value!r} must be an integer from 0 to {limit}")
    return value


def _encoder_dp(value) -> Optional[bool]:
    if _unset(value):
        return None
    if not isinstance(value, bool):
        raise ValueError(f"option enable_encoder_dp = {value!r} must be a boolean (True or False)")
    return value


def _system_name(value) -> Optional[str]:
    """A system name (text; surrounding blanks dropped); None / '' is not given."""
    if _unset(value):
        return None
    if not isinstance(value, str):
        raise ValueError(f"option decode_system = {value!r} must be text (a system name)")
    return value.strip() or None


_VALUES: Dict[str, Callable] = {
    **{key: (lambda value, key=key: _quant_mode(key, value)) for key in QUANT_OPTIONS},
    "free_gpu_memory_fraction": _fraction,
    "max_seq_len": _max_seq_len,
    "nextn": draft_length,
    "nextn_accepted": _accepted,
    **{key: (lambda value, key=key: _image_count(key, value)) for key in IMAGE_OPTIONS[:3]},
    "enable_encoder_dp": _encoder_dp,
    "decode_system": _system_name,
}


# ---- the options argument ---------------------------------------------------------------------


def parse_options(options) -> Options:
    """`Options` of an ``options`` argument (a dict, an `Options` or None);
    ValueError for anything else, an unknown key or a malformed value."""
    if options is None:
        return NO_OPTIONS
    if isinstance(options, Options):
        return options
    if not isinstance(options, dict):
        raise ValueError(f"options = {options!r} must be a dict of options ({', '.join(OPTIONS)}) or None")
    values = {}
    for key, value in options.items():
        parse = _VALUES.get(key)
        if parse is None:
            raise ValueError(f"unknown option {key!r}; valid options: {', '.join(OPTIONS)}")
        values[key] = parse(value)
    quant = {SPEC_MODES[key][0]: values[key] for key in QUANT_OPTIONS if values.get(key) is not None}
    images = {field: values[key] for key, field in zip(IMAGE_OPTIONS, ImageOptions._fields)
              if values.get(key) is not None}  # fmt: skip
    return Options(
        QuantOverrides(**quant),
        MemoryOptions(values.get("free_gpu_memory_fraction"), values.get("max_seq_len")),
        MtpOptions(values.get("nextn", 0), values.get("nextn_accepted")),
        ImageOptions(**images) if images else NO_IMAGES,
        values.get("decode_system") or "",
    )


def options_over(base: Options, given: Dict[str, object]) -> Options:
    """The options of one row of a SQL call: ``given`` (the row's options
    STRUCT as a dict; a None field is unset) over ``base`` (the session's),
    field by field, as the Rust functions merge them. ValueError as
    `parse_options` for an unknown key or a malformed value."""
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return base
    # A SQL text column holds MTP's depth as text ('2', 'auto'), as a setting does.
    depth_text = given.get("nextn") if isinstance(given.get("nextn"), str) else None
    row = parse_options({k: v for k, v in given.items() if not (k == "nextn" and depth_text is not None)})
    if depth_text is not None:
        row = row._replace(mtp=row.mtp._replace(nextn=settings_options({"nextn": depth_text}).mtp.nextn))
    quant = base.quant._replace(**{SPEC_MODES[k][0]: getattr(row.quant, SPEC_MODES[k][0])
                                   for k in QUANT_OPTIONS if k in given})  # fmt: skip
    memory = base.memory._replace(**{k: getattr(row.memory, k) for k in MEMORY_OPTIONS if k in given})
    mtp_fields = dict(zip(MTP_OPTIONS, MtpOptions._fields))
    mtp = base.mtp._replace(**{mtp_fields[k]: getattr(row.mtp, mtp_fields[k]) for k in MTP_OPTIONS if k in given})
    images = base.images._replace(**{field: getattr(row.images, field)
                                     for key, field in zip(IMAGE_OPTIONS, ImageOptions._fields) if key in given})  # fmt: skip
    decode_system = row.decode_system if "decode_system" in given else base.decode_system
    return Options(quant, memory, mtp, images, decode_system)


def given_image_options(options) -> Tuple[str, ...]:
    """The image option keys an ``options`` argument sets (a dict's keys
    with a value; an `Options`' fields that differ from the defaults): what
    the callers that price no encoder refuse."""
    if isinstance(options, dict):
        return tuple(key for key in IMAGE_OPTIONS if not _unset(options.get(key)))
    if isinstance(options, Options):
        return tuple(key for key, field in zip(IMAGE_OPTIONS, ImageOptions._fields)
                     if getattr(options.images, field) != getattr(NO_IMAGES, field))  # fmt: skip
    return ()


def refuse_decode_system(function: str, options) -> None:
    """ValueError when ``options`` (a dict, or a row's STRUCT as a dict) sets
    ``decode_system`` for a function that prices no disaggregated
    deployment (the Rust functions' text)."""
    if isinstance(options, dict) and not _unset(options.get("decode_system")):
        raise ValueError(
            f"{function}: option decode_system is for estimate_disagg (a disaggregated deployment's decode "
            "workers); the searches read SET aic.decode_system"
        )


def step_options(options) -> Options:
    """`parse_options` for the step functions, which price one step and take
    ``nextn`` alone: a given ``nextn_accepted`` is refused (the projection
    over accepted tokens is the serving estimates', options.md 2.4), and so
    is a given image option (the encoder phase is the serving estimates')."""
    parsed = parse_options(options)
    if parsed.mtp.accepted is not None:
        raise ValueError(
            "option nextn_accepted is not taken by the step functions: they price one step at the draft depth "
            "nextn; the acceptance projection is the serving estimates' (estimate_agg, estimate_disagg)"
        )
    refuse_decode_system("the step functions", options)
    images = given_image_options(options)
    if images:
        named = f"options {', '.join(images)} are" if len(images) > 1 else f"option {images[0]} is"
        raise ValueError(
            f"{named} not taken by the step functions: a step prices the text tokens it is given; the vision "
            "encoder and the image tokens are the serving estimates' (estimate_agg, estimate_disagg, estimate_memory)"
        )
    return parsed


def quant_overrides(options) -> QuantOverrides:
    """The `QuantOverrides` of an ``options`` argument, or overrides as they
    are (what a `StepContext` is keyed by)."""
    if isinstance(options, QuantOverrides):
        return options
    return parse_options(options).quant


# ---- the session settings ---------------------------------------------------------------------


def _float_text(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"setting {key} = {text!r} is not a number") from None


def _int_text(key: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"setting {key} = {text!r} is not an integer") from None


def _bool_text(key: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"setting {key} = {text!r} is not a boolean ('true' or 'false')")


def _nextn_text(key: str, text: str) -> Union[int, float, str]:
    """'auto' (any case, as the spec's CLI reads it), an integer, or a number
    the depth rule then refuses with the spec's text (``1.5``)."""
    stripped = text.strip()
    if stripped.lower() == AUTO:
        return AUTO
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        return float(stripped)
    except ValueError:
        raise ValueError(f"setting {key} = {text!r} is not an integer or 'auto'") from None


# Settings read from text before their option's rule; a blank text is unset.
# The quant settings are the mode names themselves ('' = unset).
_FROM_TEXT: Dict[str, Callable[[str, str], object]] = {
    "free_gpu_memory_fraction": _float_text,
    "max_seq_len": _int_text,
    "nextn": _nextn_text,
    "nextn_accepted": _float_text,
    "image_height": _int_text,
    "image_width": _int_text,
    "num_images": _int_text,
    "enable_encoder_dp": _bool_text,
}


def settings_options(settings: Dict[str, object]) -> Options:
    """`Options` of session settings (keys without ``aic.``; values strings,
    '' = unset): the quant settings are mode names, the fraction and
    ``nextn_accepted`` numbers, ``max_seq_len``, ``image_height``,
    ``image_width`` and ``num_images`` integers, ``nextn`` an integer or
    'auto', ``enable_encoder_dp`` a boolean ('true' / 'false'). Keys that
    are not options are left alone."""
    values = {}
    for key in OPTIONS:
        value = settings.get(key)
        if isinstance(value, str) and key in _FROM_TEXT:
            if value.strip() == "":
                continue
            value = _FROM_TEXT[key](key, value)
        if value is not None:
            values[key] = value
    return parse_options(values)
