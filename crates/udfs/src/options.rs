//! The estimators' options: an optional trailing STRUCT argument whose
//! fields are the spec's user-facing options (docs/spec/options.md), e.g.
//! `estimate_agg('Qwen/Qwen3-32B', 'h200_sxm/vllm/0.19.0', 8, 64, 1024, 256,
//! named_struct('kvcache_quant', 'fp8'))`.
//!
//! Why a STRUCT and not named arguments: DataFusion 55 resolves named
//! arguments of scalar functions only up to the last one given (every
//! earlier optional parameter must be written out, so `kvcache_quant =>
//! 'fp8'` alone would need `prefix`, `ctx_tokens`, `moe_tp`, `moe_ep`
//! first) and not at all for table functions. A STRUCT takes any subset of
//! options in any order, is one expression whose fields can be columns (a
//! grid over options is one join), and reads the same in every function.
//! A field that is NULL, or absent, takes the session's setting
//! (`SET aic.kvcache_quant = 'fp8'`), else the spec's default.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, StructArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Fields};
use datafusion::common::{DataFusionError, Result, ScalarValue, exec_err};
use datafusion::logical_expr::ColumnarValue;

use aicsql_serving::{Images, KvSizing, NextN};
use aicsql_tables::TablesError;
use aicsql_tables::step::QuantOverrides;

use crate::config::AicOptions;

/// What an option's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A mode name (text).
    Quant,
    /// A number in (0, 1].
    Fraction,
    /// An integer >= 1.
    Length,
    /// MTP's draft depth: an integer >= 0, or the text 'auto'.
    Depth,
    /// MTP's accepted draft tokens per step: a number in [0, nextn].
    Accepted,
    /// An image side in pixels, or a number of images: an integer >= 0.
    Count,
    /// A boolean.
    Flag,
    /// A system name (text).
    System,
}

/// The options the functions take, in the order the reference lists them.
const OPTIONS: [(&str, Kind); 14] = [
    ("gemm_quant", Kind::Quant),
    ("moe_quant", Kind::Quant),
    ("kvcache_quant", Kind::Quant),
    ("fmha_quant", Kind::Quant),
    ("comm_quant", Kind::Quant),
    ("free_gpu_memory_fraction", Kind::Fraction),
    ("max_seq_len", Kind::Length),
    ("nextn", Kind::Depth),
    ("nextn_accepted", Kind::Accepted),
    ("image_height", Kind::Count),
    ("image_width", Kind::Count),
    ("num_images", Kind::Count),
    ("enable_encoder_dp", Kind::Flag),
    ("decode_system", Kind::System),
];

/// The functions that price a disaggregated deployment's two roles.
const DISAGG: [&str; 1] = ["estimate_disagg"];

/// The options only the estimates take: the acceptance projection and the
/// images a prefill encodes (a step prices one pass of the language model).
const ESTIMATE_ONLY: [&str; 5] = ["nextn_accepted", "image_height", "image_width", "num_images", "enable_encoder_dp"];

/// The functions that project MTP's acceptance onto their results (the
/// step functions price one verification iteration and take no acceptance).
const PROJECTING: [&str; 3] = ["estimate_agg", "estimate_disagg", "estimate_memory"];

/// What the reference says of the `options` argument.
pub(crate) const OPTIONS_DOC: &str = "Optional, last: a STRUCT of the spec's options, any subset in any order, \
     e.g. named_struct('kvcache_quant', 'fp8', 'gemm_quant', 'fp8_block'). Quant overrides: gemm_quant, moe_quant, \
     kvcache_quant, fmha_quant (the spec's mode names: bfloat16, fp8, fp8_block, nvfp4, ...) and comm_quant \
     (half, int8, fp8; a label here). TRT-LLM's KV-cache knobs of an aggregated deployment: max_seq_len (the \
     sequence length the KV cache is sized for; default isl + osl) and free_gpu_memory_fraction (in (0, 1]; \
     default 0.9), which vLLM, SGLang and disaggregated workers ignore, as the spec does. MTP speculative \
     decoding: nextn (draft tokens per decode step, an integer or 'auto' for the checkpoint's MTP layers; 0: \
     off) and nextn_accepted (average accepted draft tokens per step, in [0, nextn], required when nextn > 0): \
     a decode step verifies nextn + 1 tokens and runs (L + nextn) / L times the layers, TPOT and rates are \
     projected by 1 + nextn_accepted at the spec's three decimals (the step functions take nextn only). Images \
     of vision-language models (Qwen3-VL): image_height and image_width (pixels; 0: no image), num_images (per \
     request, default 1) and enable_encoder_dp (default true: each GPU encodes its share of the images with the \
     whole encoder; false shards the encoder over tp): the encoder runs before each prefill and every image \
     adds its merged tokens to the sequence; other models ignore images, as the spec does. decode_system \
     (estimate_disagg only): the system of the decode workers, e.g. 'b200_sxm' (each role reads its own \
     system's data and memory; same backend, the database's version if it names one, else the decode \
     system's latest). A NULL or absent \
     field takes the session's SET aic.<field> (default: the spec's); so does an empty mode name, as the spec \
     reads one. An unknown field, mode name or out-of-range value is an error; a mode the database has no data \
     for is a miss.";

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null)
}

/// Checks an options STRUCT's fields (names and types). When the batch
/// runs, not when the call is planned: the step functions' signature is a
/// `OneOf` whose planning replaces a user-defined coercion's message with a
/// generic one, and an error must name the option.
fn check_fields(function: &str, fields: &Fields) -> std::result::Result<(), String> {
    for field in fields {
        let name = field.name();
        let Some(&(_, kind)) = OPTIONS.iter().find(|(known, _)| known == name) else {
            let known: Vec<&str> = OPTIONS.iter().map(|(k, _)| *k).collect();
            return Err(format!("{function}: unknown option '{name}'; options are {}", known.join(", ")));
        };
        let t = field.data_type();
        let fits = match kind {
            Kind::Quant | Kind::System => is_text(t),
            Kind::Fraction => t.is_numeric() || t == &DataType::Null,
            Kind::Length => t.is_integer() || t == &DataType::Null,
            Kind::Depth => t.is_numeric() || is_text(t),
            Kind::Accepted => t.is_numeric() || t == &DataType::Null,
            Kind::Count => t.is_integer() || t == &DataType::Null,
            Kind::Flag => matches!(t, DataType::Boolean | DataType::Null),
        };
        if !fits {
            let what = match kind {
                Kind::Quant => "text (a mode name)",
                Kind::System => "text (a system name)",
                Kind::Fraction => "a number",
                Kind::Length => "an integer",
                Kind::Depth => "an integer or 'auto'",
                Kind::Accepted => "a number",
                Kind::Count => "an integer",
                Kind::Flag => "a boolean",
            };
            return Err(format!("{function}: option {name} must be {what}, got {t}"));
        }
    }
    Ok(())
}

/// Whether `types` ends with an options STRUCT (its fields are checked
/// when the batch runs, [`check_fields`]); the caller coerces the arguments
/// before it and keeps its type.
fn trailing_options(types: &[DataType]) -> bool {
    matches!(types.last(), Some(DataType::Struct(_)))
}

/// The arguments before the options, and the options column if given.
pub(crate) fn split(values: &[ColumnarValue]) -> (&[ColumnarValue], Option<&ColumnarValue>) {
    match values.split_last() {
        Some((last, rest)) if matches!(last.data_type(), DataType::Struct(_)) => (rest, Some(last)),
        _ => (values, None),
    }
}

/// One field of the options, cast once per batch to the type its kind reads.
enum Column {
    Quant(StringArray),
    Fraction(Float64Array),
    Length(Int64Array),
    /// `nextn` given as numbers or as text.
    DepthNumber(Float64Array),
    DepthText(StringArray),
    Count(Int64Array),
    Flag(BooleanArray),
    System(StringArray),
}

/// The options a model is built with: one warm model per distinct set.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ModelOptions {
    pub quant: QuantOverrides,
    pub nextn: NextN,
    /// Checked against `nextn` when both are known (a serving model
    /// requires it when the depth is not 0).
    pub nextn_accepted: Option<f64>,
    /// The images of a request (the estimates only).
    pub images: Images,
}

/// The options of one row: every option the functions take.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct RowOptions {
    pub model: ModelOptions,
    pub kv_sizing: KvSizing,
}

/// The options STRUCT of a batch, its fields cast once.
struct Given {
    structs: StructArray,
    columns: Vec<(&'static str, Column)>,
    /// One STRUCT for the whole batch (row 0 serves every row).
    scalar: bool,
}

/// A batch's options, read row by row over the session's defaults.
pub(crate) struct Options {
    function: &'static str,
    defaults: RowOptions,
    /// The session's `aic.decode_system` (empty: the prefill's system).
    decode_system: String,
    /// Absent: every row takes the defaults.
    given: Option<Given>,
}

impl Options {
    /// `value` (the trailing STRUCT, if any) over the session's `settings`.
    pub(crate) fn new(function: &'static str, value: Option<&ColumnarValue>, settings: &AicOptions) -> Result<Options> {
        let projects = PROJECTING.contains(&function);
        let defaults = RowOptions {
            model: ModelOptions {
                quant: settings.quant,
                nextn: settings.nextn,
                // The step prices one verification iteration: the session's
                // acceptance is for the estimates.
                nextn_accepted: settings.nextn_accepted.filter(|_| projects),
                images: if projects { settings.images } else { Images::default() },
            },
            kv_sizing: settings.kv_sizing,
        };
        let decode_system = settings.decode_system.clone();
        let Some(value) = value else { return Ok(Options { function, defaults, decode_system, given: None }) };
        let (array, scalar): (ArrayRef, bool) = match value {
            ColumnarValue::Array(a) => (Arc::clone(a), false),
            ColumnarValue::Scalar(ScalarValue::Struct(s)) => (Arc::clone(s) as ArrayRef, true),
            ColumnarValue::Scalar(other) => {
                return exec_err!("{function}: options must be a STRUCT, got {}", other.data_type());
            }
        };
        let Some(structs) = array.as_any().downcast_ref::<StructArray>() else {
            return exec_err!("{function}: options must be a STRUCT, got {}", array.data_type());
        };
        let DataType::Struct(fields) = structs.data_type() else { unreachable!("a StructArray's type is Struct") };
        check_fields(function, fields).map_err(DataFusionError::Execution)?;
        if !projects && let Some(field) = fields.iter().find(|f| ESTIMATE_ONLY.contains(&f.name().as_str())) {
            let why = if field.name() == "nextn_accepted" {
                "a step prices one verification iteration of nextn + 1 tokens, whatever is accepted"
            } else {
                "a step prices the language model's pass; the estimates add the image encoder and its tokens"
            };
            return exec_err!(
                "{function}: option {} is for the estimates (estimate_agg, estimate_disagg, estimate_memory); {why}",
                field.name()
            );
        }
        if !DISAGG.contains(&function) && fields.iter().any(|f| f.name() == "decode_system") {
            return exec_err!(
                "{function}: option decode_system is for estimate_disagg (a disaggregated deployment's decode \
                 workers); the searches read SET aic.decode_system"
            );
        }
        let mut columns = Vec::with_capacity(fields.len());
        for (field, values) in fields.iter().zip(structs.columns()) {
            let Some(&(name, kind)) = OPTIONS.iter().find(|(known, _)| known == field.name()) else {
                unreachable!("checked above")
            };
            let depth_as_text = kind == Kind::Depth && is_text(values.data_type());
            let target = match kind {
                Kind::Quant | Kind::System => DataType::Utf8,
                Kind::Depth if depth_as_text => DataType::Utf8,
                Kind::Fraction | Kind::Depth | Kind::Accepted => DataType::Float64,
                Kind::Length | Kind::Count => DataType::Int64,
                Kind::Flag => DataType::Boolean,
            };
            let cast = cast(values, &target)?;
            let strings = || cast.as_any().downcast_ref::<StringArray>().cloned();
            let floats = || cast.as_any().downcast_ref::<Float64Array>().cloned();
            let column = match kind {
                Kind::Quant => strings().map(Column::Quant),
                Kind::Fraction | Kind::Accepted => floats().map(Column::Fraction),
                Kind::Depth if depth_as_text => strings().map(Column::DepthText),
                Kind::Depth => floats().map(Column::DepthNumber),
                Kind::Length => cast.as_any().downcast_ref::<Int64Array>().cloned().map(Column::Length),
                Kind::Count => cast.as_any().downcast_ref::<Int64Array>().cloned().map(Column::Count),
                Kind::Flag => cast.as_any().downcast_ref::<BooleanArray>().cloned().map(Column::Flag),
                Kind::System => strings().map(Column::System),
            };
            let Some(column) = column else { return exec_err!("{function}: option {name} did not cast to {target}") };
            columns.push((name, column));
        }
        Ok(Options {
            function,
            defaults,
            decode_system,
            given: Some(Given { structs: structs.clone(), columns, scalar }),
        })
    }

    /// The options of `row`: the row's fields over the defaults.
    pub(crate) fn get(&self, row: usize) -> Result<RowOptions> {
        let Some(Given { structs, columns, scalar }) = &self.given else { return Ok(self.defaults) };
        let row = if *scalar { 0 } else { row };
        let mut out = self.defaults;
        if structs.is_null(row) {
            return Ok(out);
        }
        let function = self.function;
        for (name, column) in columns {
            match column {
                // An empty name leaves the mode unset, as the spec's `X[name] if name else None`.
                Column::Quant(values) if !values.is_null(row) && !values.value(row).is_empty() => {
                    let value = values.value(row);
                    let bad = |e: TablesError| {
                        DataFusionError::Execution(format!("{function}: option {name} = '{value}': {e}"))
                    };
                    let q = &mut out.model.quant;
                    match *name {
                        "gemm_quant" => q.gemm = Some(value.parse().map_err(bad)?),
                        "moe_quant" => q.moe = Some(value.parse().map_err(bad)?),
                        "kvcache_quant" => q.kv = Some(value.parse().map_err(bad)?),
                        "fmha_quant" => q.fmha = Some(value.parse().map_err(bad)?),
                        _ => q.comm = Some(value.parse().map_err(bad)?),
                    }
                }
                Column::Fraction(values) if !values.is_null(row) && *name == "nextn_accepted" => {
                    out.model.nextn_accepted = Some(values.value(row));
                }
                Column::Fraction(values) if !values.is_null(row) => {
                    out.kv_sizing.free_gpu_memory_fraction = Some(fraction(function, values.value(row))?);
                }
                Column::DepthNumber(values) if !values.is_null(row) => {
                    let value = values.value(row);
                    let text = aicsql_tables::pymath::py_repr(aicsql_tables::Num::Float(value));
                    let text = text.strip_suffix(".0").unwrap_or(&text);
                    out.model.nextn = NextN::from_number(value, text)
                        .map_err(|e| DataFusionError::Execution(format!("{function}: option nextn = {text}: {e}")))?;
                }
                Column::DepthText(values) if !values.is_null(row) => {
                    let value = values.value(row);
                    out.model.nextn = NextN::parse(value).map_err(|e| {
                        DataFusionError::Execution(format!("{function}: option nextn = '{value}': {e}"))
                    })?;
                }
                Column::Length(values) if !values.is_null(row) => {
                    out.kv_sizing.max_seq_len = Some(length(function, values.value(row))?);
                }
                Column::Count(values) if !values.is_null(row) => {
                    let value = image_count(name, values.value(row))
                        .map_err(|e| DataFusionError::Execution(format!("{function}: {e}")))?;
                    let images = &mut out.model.images;
                    match *name {
                        "image_height" => images.height = value,
                        "image_width" => images.width = value,
                        _ => images.count = value,
                    }
                }
                Column::Flag(values) if !values.is_null(row) => out.model.images.encoder_dp = values.value(row),
                _ => {}
            }
        }
        if PROJECTING.contains(&function) {
            accepted_in_range(function, &out.model)?;
        }
        Ok(out)
    }

    /// The decode workers' system of `row` (empty: the prefill's): the
    /// row's `decode_system` field when set and not empty, else the
    /// session's.
    pub(crate) fn decode_system(&self, row: usize) -> &str {
        let given = self.given.as_ref().and_then(|g| {
            let row = if g.scalar { 0 } else { row };
            if g.structs.is_null(row) {
                return None;
            }
            g.columns.iter().find_map(|(name, column)| match column {
                Column::System(values) if *name == "decode_system" && !values.is_null(row) => {
                    Some(values.value(row)).filter(|v| !v.trim().is_empty())
                }
                _ => None,
            })
        });
        given.unwrap_or(self.decode_system.as_str())
    }

    /// The model options of `row` (the functions that size no KV cache).
    pub(crate) fn model(&self, row: usize) -> Result<ModelOptions> {
        self.get(row).map(|o| o.model)
    }
}

/// MTP's accepted tokens against a numeric depth (the spec's rule: given,
/// and within `[0, nextn]`); a depth of 'auto' is checked when the
/// checkpoint resolves it, as the serving model is built.
fn accepted_in_range(function: &str, options: &ModelOptions) -> Result<()> {
    match (options.nextn, options.nextn_accepted) {
        (NextN::Depth(n), a) => aicsql_serving::accepted_tokens(n, a)
            .map(|_| ())
            .map_err(|e| DataFusionError::Execution(format!("{function}: option nextn_accepted: {e}"))),
        _ => Ok(()),
    }
}

/// A free-memory fraction: in (0, 1]. The spec takes any number (its
/// docstring's "> 0 and <= 1" is not enforced); a fraction outside it
/// sizes no real KV cache, so aicsql refuses it as input.
pub(crate) fn fraction(function: &str, value: f64) -> Result<f64> {
    match valid_fraction(value) {
        Some(value) => Ok(value),
        None => exec_err!("{function}: option free_gpu_memory_fraction = {value} must be in (0, 1]"),
    }
}

/// An image side (pixels) or a number of images, for the options and the
/// `aic.image_*` / `aic.num_images` settings alike: an integer from 0 (no
/// image) to the limit of its kind. The spec takes any integer (a negative
/// one means no image); a negative count describes nothing, so aicsql
/// refuses it.
pub(crate) fn image_count(name: &str, value: i64) -> std::result::Result<u32, String> {
    let limit = if name == "num_images" { aicsql_serving::MAX_IMAGES } else { aicsql_serving::MAX_IMAGE_SIDE };
    u32::try_from(value)
        .ok()
        .filter(|v| *v <= limit)
        .ok_or_else(|| format!("option {name} = {value} must be an integer from 0 to {limit}"))
}

/// A maximum sequence length: at least 1 token.
pub(crate) fn length(function: &str, value: i64) -> Result<u32> {
    match valid_length(value) {
        Some(value) => Ok(value),
        None => exec_err!("{function}: option max_seq_len = {value} must be an integer from 1 to {}", u32::MAX),
    }
}

/// The one range rule of a free-memory fraction, for the options and the
/// `aic.free_gpu_memory_fraction` setting alike.
pub(crate) fn valid_fraction(value: f64) -> Option<f64> {
    (value > 0.0 && value <= 1.0).then_some(value)
}

/// The one range rule of a maximum sequence length (options and setting).
pub(crate) fn valid_length(value: i64) -> Option<u32> {
    u32::try_from(value).ok().filter(|v| *v >= 1)
}

/// Coerces `types` with `plain` for the arguments before a trailing options
/// STRUCT, which keeps its type.
pub(crate) fn coerce(
    types: &[DataType],
    plain: impl FnOnce(&[DataType]) -> Result<Vec<DataType>>,
) -> Result<Vec<DataType>> {
    if !trailing_options(types) {
        return plain(types);
    }
    let (last, rest) = types.split_last().unwrap_or_else(|| unreachable!("trailing_options saw a last type"));
    let mut out = plain(rest)?;
    out.push(last.clone());
    Ok(out)
}

/// Whether the options vary by row (an array, not one STRUCT for the batch).
pub(crate) fn per_row(value: Option<&ColumnarValue>) -> bool {
    matches!(value, Some(ColumnarValue::Array(_)))
}
