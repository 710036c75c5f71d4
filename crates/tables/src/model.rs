//! Model descriptions from Hugging Face `config.json` files (docs/spec
//! section 2; families, nested text configs and quantisation inference as
//! docs/spec/families_mla_gptoss_fp8static.md 1-2 restate them).
//!
//! Parsing here is lenient (every field optional) because `aic.meta.models`
//! lists every shipped config, including families no estimator prices; the
//! engine step checks what its family needs.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::discovery::DocFile;
use crate::error::{Result, TablesError};

/// The spec's architecture -> family map, in its order (the order of the
/// list an unknown architecture's error shows).
pub const ARCHITECTURES: [(&str, &str); 27] = [
    ("LlamaForCausalLM", "LLAMA"),
    ("Qwen2ForCausalLM", "LLAMA"),
    ("Qwen3ForCausalLM", "LLAMA"),
    ("Qwen3VLForConditionalGeneration", "QWEN3VL"),
    ("Qwen3VLMoeForConditionalGeneration", "QWEN3VL_MOE"),
    ("MiMoForCausalLM", "LLAMA"),
    ("DeepSeekForCausalLM", "DEEPSEEK"),
    ("DeepseekV3ForCausalLM", "DEEPSEEK"),
    ("DeepseekV32ForCausalLM", "DEEPSEEKV32"),
    ("GlmMoeDsaForCausalLM", "DEEPSEEKV32"),
    ("DeepseekV4ForCausalLM", "DEEPSEEKV4"),
    ("KimiK25ForConditionalGeneration", "KIMIK25"),
    ("NemotronForCausalLM", "NEMOTRONNAS"),
    ("DeciLMForCausalLM", "NEMOTRONNAS"),
    ("NemotronHForCausalLM", "NEMOTRONH"),
    ("MixtralForCausalLM", "MOE"),
    ("GptOssForCausalLM", "MOE"),
    ("Qwen2MoeForCausalLM", "MOE"),
    ("Qwen3MoeForCausalLM", "MOE"),
    ("MiniMaxM2ForCausalLM", "MOE"),
    ("MiniMaxM3ForCausalLM", "MINIMAXM3"),
    ("MiniMaxM3SparseForConditionalGeneration", "MINIMAXM3"),
    ("MiMoV2FlashForCausalLM", "HYBRIDMOE"),
    ("Llama4ForConditionalGeneration", "HYBRIDMOE"),
    ("Qwen3_5ForConditionalGeneration", "QWEN35"),
    ("Qwen3_5MoeForConditionalGeneration", "QWEN35"),
    ("Gemma4ForConditionalGeneration", "GEMMA4MIX"),
];

/// Multimodal wrappers whose language model lives under `text_config`.
const NESTED_TEXT_CONFIG: [&str; 8] = [
    "KimiK25ForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Gemma4ForConditionalGeneration",
    "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration",
];

/// The family of an architecture, as the spec maps it.
pub fn family_of(architecture: &str) -> Option<&'static str> {
    ARCHITECTURES.iter().find(|(a, _)| *a == architecture).map(|(_, f)| *f)
}

/// What the checkpoint says about its quantisation (the spec's
/// `_infer_quantization_fields`), before any mode is chosen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuantFields {
    /// Normalised algorithm: `fp8`, `fp8_block`, `nvfp4`, `mxfp4`,
    /// `compressed-tensors`, `mixed_precision`, or whatever else was written.
    pub algo: Option<String>,
    /// `fp8`, `bfloat16`, or another name as written (lower-cased).
    pub kv_cache: Option<String>,
    /// Activations quantised dynamically (`Some(true)`), statically, or unknown.
    pub dynamic: Option<bool>,
    /// compressed-tensors: the weights' base algorithm (`int4_wo`, `int8_wo`,
    /// `fp8`, `fp8_block`) and the layer categories its `ignore` list keeps
    /// unquantised (`attention`, `routing_experts`, `shared_experts`,
    /// `dense_mlp`, `lm_head`).
    pub compressed_base: Option<String>,
    pub compressed_ignored: Vec<&'static str>,
    /// ModelOpt `mixed_precision`: the per-layer algorithms (`fp8`,
    /// `nvfp4`, or as written) of the routed experts and of every other
    /// layer, from the hf quant config's and the `quantization_config`'s
    /// `quantized_layers` and the latter's `config_groups`.
    pub mixed_moe: Vec<String>,
    pub mixed_other: Vec<String>,
}

/// The fields of a model config the estimators read, with the spec's fallbacks applied.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// `Org/Name`.
    pub model: String,
    pub architecture: Option<String>,
    pub family: Option<&'static str>,
    pub num_hidden_layers: Option<i64>,
    pub hidden_size: Option<i64>,
    pub num_attention_heads: Option<i64>,
    /// `num_key_value_heads`, 0 when absent or null.
    pub num_key_value_heads: Option<i64>,
    pub head_dim: Option<i64>,
    pub intermediate_size: Option<i64>,
    pub vocab_size: Option<i64>,
    pub num_experts: Option<i64>,
    pub num_experts_per_tok: Option<i64>,
    pub moe_intermediate_size: Option<i64>,
    /// The normalised quant algorithm (as [`QuantFields::algo`]), for listings.
    pub quant_method: Option<String>,
    pub quant: QuantFields,
    pub use_qk_norm: bool,
    /// The config the fields were read from: `text_config` for the nested
    /// multimodal wrappers, else the file's top level. Family builders read
    /// their own fields (MLA ranks, hybrid layer patterns) from it.
    pub text: Value,
    /// The top-level `quantization_config` (promoted from `text_config`
    /// when only there), `{}` when absent.
    pub quantization_config: Value,
    /// The checkpoint's exclusion globs (modules left unquantised): the
    /// `quantization_config`'s `modules_to_not_convert`, `exclude_modules`
    /// and `ignore`, then the hf quant config's `exclude_modules` and
    /// `ignore`, in that order (families_dsa.md 2.2).
    pub exclusion_globs: Vec<String>,
    /// The top-level `vision_config` of a Qwen3-VL checkpoint when it is a
    /// non-empty object (what builds the spec's vision encoder,
    /// docs/spec/options.md 4.2); `None` for every other model.
    pub vision: Option<Value>,
    pub path: PathBuf,
}

impl ModelConfig {
    /// An integer field of [`ModelConfig::text`]: `None` when absent or
    /// null, an error naming the file when it is not an integer.
    pub fn int(&self, key: &str) -> Result<Option<i64>> {
        int_field(&self.text, key, &self.path)
    }
}

fn int_field(cfg: &Value, key: &str, path: &std::path::Path) -> Result<Option<i64>> {
    match cfg.get(key).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| TablesError::document(path, format!("`{key}`: expected an integer, found {v}"))),
    }
}

/// Python truthiness of a JSON value (`x or y` chains of the spec).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's `str(v)` of a scalar, for the names the spec lower-cases.
fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

/// The first truthy value of `keys` in `obj`.
fn first_truthy<'v>(obj: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().filter_map(|k| obj.get(*k)).find(|v| truthy(v))
}

fn normalise_algo(v: Option<&Value>) -> Option<String> {
    let algo = py_str(v?).trim().to_lowercase();
    Some(match algo.as_str() {
        "" => return None,
        "w4a16_mxfp4" => "mxfp4".into(),
        "mixed-precision" | "mixedprecision" => "mixed_precision".into(),
        _ => algo,
    })
}

fn normalise_kv(v: Option<&Value>) -> Option<String> {
    let algo = py_str(v?).trim().to_lowercase();
    Some(match algo.as_str() {
        "" => return None,
        "fp8" | "e4m3" | "e5m2" => "fp8".into(),
        "fp16" | "float16" | "bf16" | "bfloat16" => "bfloat16".into(),
        _ => algo,
    })
}

/// `_infer_quantization_fields`: `hq` is the companion file's `quantization`
/// section, `qc` the config's `quantization_config`.
fn quant_fields(qc: &Value, hq: &Value) -> QuantFields {
    let empty = Value::Object(Default::default());
    let qc = if qc.is_object() { qc } else { &empty };
    let hq = if hq.is_object() { hq } else { &empty };
    let pick = |first: &Value, keys: &[&str]| {
        first_truthy(hq, &keys[..1]).or_else(|| first_truthy(first, &keys[1..])).cloned()
    };
    let mut algo =
        normalise_algo(pick(qc, &["quant_algo", "quant_algo", "quant_method", "quantization_method"]).as_ref());
    let mut kv_cache = normalise_kv(
        pick(qc, &["kv_cache_quant_algo", "kv_cache_quant_algo", "kv_cache_quant_method", "kv_cache_dtype"]).as_ref(),
    );
    if kv_cache.is_none()
        && let Some(scheme) = qc.get("kv_cache_scheme").filter(|s| s.is_object())
    {
        let kind = scheme.get("type").map(py_str).unwrap_or_default().to_lowercase();
        let bits = scheme.get("num_bits").and_then(Value::as_i64).filter(|_| scheme["num_bits"].is_i64());
        if kind.contains("fp8") {
            kv_cache = Some("fp8".into());
        } else if kind == "float"
            && let Some(bits) = bits
        {
            if bits <= 8 {
                kv_cache = Some("fp8".into());
            } else if bits >= 16 {
                kv_cache = Some("bfloat16".into());
            }
        }
    }
    if algo.as_deref() == Some("fp8") && qc.get("weight_block_size").is_some_and(truthy) {
        algo = Some("fp8_block".into());
    }
    let mut fields = QuantFields { algo, kv_cache, dynamic: quant_dynamic(qc), ..QuantFields::default() };
    if fields.algo.as_deref() == Some("compressed-tensors") {
        (fields.compressed_base, fields.compressed_ignored) = compressed_tensors(qc);
    }
    if fields.algo.as_deref() == Some("mixed_precision") {
        (fields.mixed_moe, fields.mixed_other) = mixed_precision_layers(qc, hq);
    }
    fields
}

/// A ModelOpt layer algorithm, lower-cased, with fp8 / fp4 aliases folded.
fn mixed_layer_algo(value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    let algo = py_str(value).trim().to_lowercase();
    Some(match algo.as_str() {
        "" => return None,
        "fp8" | "e4m3" | "e5m2" => "fp8".into(),
        "nvfp4" | "fp4" => "nvfp4".into(),
        _ => algo,
    })
}

/// The per-layer algorithms of a ModelOpt mixed-precision checkpoint, split
/// into routed experts (a target naming `.experts.` or `routing_expert`,
/// never a shared expert) and the rest, each without repeats.
fn mixed_precision_layers(qc: &Value, hq: &Value) -> (Vec<String>, Vec<String>) {
    let (mut moe, mut other): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let mut add = |target: &str, algo: &Value| {
        let Some(algo) = mixed_layer_algo(algo) else { return };
        let target = target.to_lowercase();
        let routed =
            !target.contains("shared_expert") && (target.contains(".experts.") || target.contains("routing_expert"));
        let set = if routed { &mut moe } else { &mut other };
        if !set.contains(&algo) {
            set.push(algo);
        }
    };
    let layer_algo = |meta: &Value| -> Value {
        if meta.is_object() {
            first_truthy(meta, &["quant_algo", "quantization_algo", "quant_method"]).cloned().unwrap_or(Value::Null)
        } else {
            meta.clone()
        }
    };
    for layers in [hq.get("quantized_layers"), qc.get("quantized_layers")].into_iter().flatten() {
        for (target, meta) in layers.as_object().into_iter().flatten() {
            add(target, &layer_algo(meta));
        }
    }
    for group in qc.get("config_groups").and_then(Value::as_object).into_iter().flat_map(|g| g.values()) {
        let Some(algo) = mixed_group_algo(group) else { continue };
        for target in group.get("targets").and_then(Value::as_array).into_iter().flatten() {
            add(&py_str(target), &Value::String(algo.clone()));
        }
    }
    (moe, other)
}

/// A `config_groups` entry's algorithm: the weights' named algorithm, else
/// 8-bit floats are fp8 and 4-bit floats nvfp4.
fn mixed_group_algo(group: &Value) -> Option<String> {
    let weights = group.get("weights").filter(|w| w.is_object())?;
    let named = first_truthy(weights, &["quant_algo", "quantization_algo", "quant_method"]);
    if let Some(algo) = named.and_then(mixed_layer_algo) {
        return Some(algo);
    }
    let bits = weights.get("num_bits").filter(|b| b.is_i64()).and_then(Value::as_i64)?;
    let kind = weights.get("type").map(py_str).unwrap_or_default().to_lowercase();
    match (bits, kind.contains("float")) {
        (8, true) => Some("fp8".into()),
        (4, true) => Some("nvfp4".into()),
        _ => None,
    }
}

fn quant_dynamic(qc: &Value) -> Option<bool> {
    match qc.get("activation_scheme").map(py_str).unwrap_or_default().to_lowercase().as_str() {
        "dynamic" => return Some(true),
        "static" => return Some(false),
        _ => {}
    }
    let groups = qc.get("config_groups")?.as_object()?;
    let found: Vec<bool> = groups
        .values()
        .filter_map(Value::as_object)
        .flat_map(|g| ["input_activations", "weights"].into_iter().filter_map(move |k| g.get(k)))
        .filter_map(|item| item.as_object()?.get("dynamic").map(truthy))
        .collect();
    if found.is_empty() { None } else { Some(found.iter().any(|&d| d)) }
}

/// `parse_compressed_tensors_quant`: the base algorithm of the first
/// config group whose weights say it, and the ignored layer categories.
fn compressed_tensors(qc: &Value) -> (Option<String>, Vec<&'static str>) {
    let mut base = None;
    if let Some(groups) = qc.get("config_groups").and_then(Value::as_object) {
        for group in groups.values() {
            let weights = group.get("weights").filter(|w| truthy(w));
            let Some(weights) = weights else { continue };
            let kind = weights.get("type").map(py_str).unwrap_or_default().to_lowercase();
            if let Some(bits) = weights.get("num_bits").filter(|b| b.is_i64()).and_then(Value::as_i64) {
                base = match (bits, kind.contains("int"), kind.contains("float")) {
                    (4, true, _) => Some("int4_wo"),
                    (8, true, _) => Some("int8_wo"),
                    (8, _, true) => {
                        let strategy = weights.get("strategy").map(py_str).unwrap_or_default().to_lowercase();
                        let block = weights.get("block_structure").is_some_and(truthy);
                        Some(if strategy == "block" || block { "fp8_block" } else { "fp8" })
                    }
                    _ => None,
                };
            }
            if base.is_some() {
                break;
            }
        }
    }
    let Some(base) = base else { return (None, Vec::new()) };
    let mut ignored: Vec<&'static str> = Vec::new();
    for pattern in qc.get("ignore").and_then(Value::as_array).into_iter().flatten() {
        let p = py_str(pattern).to_lowercase();
        let mut add = |c: &'static str| {
            if !ignored.contains(&c) {
                ignored.push(c);
            }
        };
        if ["self_attn", "q_proj", "k_proj", "v_proj", "o_proj"].iter().any(|k| p.contains(k)) {
            add("attention");
        }
        if p.contains("shared_expert") {
            add("shared_experts");
        } else if p.contains("expert") {
            add("routing_experts");
        }
        if p.contains("lm_head") {
            add("lm_head");
        }
        if p.contains("mlp") && p.contains("_proj") && !p.contains("expert") {
            add("dense_mlp");
        }
    }
    (Some(base.to_string()), ignored)
}

/// Reads `model_configs/<org>--<name>_config.json` (and its `_hf_quant_config.json` companion).
pub fn read_model_config(doc: &DocFile) -> Result<ModelConfig> {
    let mut json = read_json(&doc.path)?;
    let base = doc.stem.strip_suffix("_config").unwrap_or(&doc.stem);
    let model = match base.split_once("--") {
        Some((org, name)) => format!("{org}/{name}"),
        None => base.to_string(),
    };
    let architecture = json.get("architectures").and_then(|a| a.get(0)).and_then(Value::as_str).map(str::to_string);
    let nested = architecture.as_deref().is_some_and(|a| NESTED_TEXT_CONFIG.contains(&a));
    let companion = doc.path.with_file_name(format!("{base}_hf_quant_config.json"));
    let hf_section = if companion.is_file() {
        read_json(&companion)?.get("quantization").cloned().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    // The companion stands in for a missing quantization_config; else a
    // nested wrapper's text_config may carry it.
    if json.get("quantization_config").is_none() {
        let mut synthesised = serde_json::Map::new();
        if let Some(section) = hf_section.as_object() {
            if let Some(algo) = first_truthy(&hf_section, &["quant_algo", "quantization_algo"]) {
                synthesised.insert("quant_method".into(), Value::String(py_str(algo).to_lowercase()));
            }
            if let Some(kv) = section.get("kv_cache_quant_algo").filter(|v| truthy(v)) {
                synthesised.insert("kv_cache_quant_method".into(), Value::String(py_str(kv).to_lowercase()));
            }
        }
        if !synthesised.is_empty() {
            json["quantization_config"] = Value::Object(synthesised);
        } else if nested && let Some(qc) = json.get("text_config").and_then(|t| t.get("quantization_config")).cloned() {
            json["quantization_config"] = qc;
        }
    }
    let quantization_config = json.get("quantization_config").cloned().unwrap_or(Value::Object(Default::default()));
    let quant = quant_fields(&quantization_config, &hf_section);
    let exclusion_globs = [
        (&quantization_config, "modules_to_not_convert"),
        (&quantization_config, "exclude_modules"),
        (&quantization_config, "ignore"),
        (&hf_section, "exclude_modules"),
        (&hf_section, "ignore"),
    ]
    .iter()
    .filter_map(|(section, key)| section.as_object()?.get(*key)?.as_array())
    .flatten()
    .filter_map(|glob| glob.as_str().map(str::to_string))
    .collect();
    let text = match json.get("text_config") {
        Some(t) if nested => {
            if !t.is_object() {
                return Err(TablesError::document(&doc.path, "`text_config` must be an object"));
            }
            t.clone()
        }
        _ => json.clone(),
    };
    let int = |key: &str| int_field(&text, key, &doc.path);
    let truthy_int = |key: &str| -> Result<Option<i64>> { Ok(int(key)?.filter(|&v| v != 0)) };
    let hidden_size = int("hidden_size")?;
    let heads = int("num_attention_heads")?;
    let head_dim = match truthy_int("head_dim")?.or(truthy_int("attention_head_dim")?) {
        Some(d) => Some(d),
        None => match (hidden_size, heads) {
            (Some(h), Some(n)) if n > 0 => Some(h.div_euclid(n)),
            (Some(_), Some(_)) => Some(0),
            _ => None,
        },
    };
    let layers = match int("num_hidden_layers")? {
        Some(l) => Some(l),
        None => match (text.get("layers_block_type"), text.get("hybrid_override_pattern")) {
            (Some(Value::Array(a)), _) => Some(a.len() as i64),
            (_, Some(Value::String(p))) => Some(p.chars().count() as i64),
            _ => None,
        },
    };
    let intermediate_size = int("intermediate_size")?;
    let num_experts =
        first_some(&[truthy_int("num_local_experts")?, truthy_int("n_routed_experts")?]).or(int("num_experts")?);
    let num_experts_per_tok = match int("num_experts_per_tok")? {
        Some(k) => Some(k),
        None => int("top_k_experts")?,
    };
    let moe_intermediate_size = truthy_int("moe_intermediate_size")?.or(truthy_int("intermediate_size")?);
    let family = architecture.as_deref().and_then(family_of);
    let use_qk_norm =
        matches!(architecture.as_deref(), Some("Qwen3ForCausalLM" | "Qwen3MoeForCausalLM" | "MiniMaxM2ForCausalLM"));
    let vision = match architecture.as_deref() {
        Some("Qwen3VLForConditionalGeneration" | "Qwen3VLMoeForConditionalGeneration") => {
            json.get("vision_config").filter(|v| truthy(v)).cloned()
        }
        _ => None,
    };
    Ok(ModelConfig {
        model,
        architecture,
        family,
        num_hidden_layers: layers,
        hidden_size,
        num_attention_heads: heads,
        num_key_value_heads: Some(int("num_key_value_heads")?.unwrap_or(0)),
        head_dim,
        intermediate_size,
        vocab_size: int("vocab_size")?,
        num_experts,
        num_experts_per_tok,
        moe_intermediate_size,
        quant_method: quant.algo.clone(),
        quant,
        use_qk_norm,
        text,
        quantization_config,
        exclusion_globs,
        vision,
        path: doc.path.clone(),
    })
}

fn first_some(values: &[Option<i64>]) -> Option<i64> {
    values.iter().flatten().next().copied()
}

fn read_json(path: &std::path::Path) -> Result<Value> {
    let text = fs::read_to_string(path).map_err(|e| TablesError::io(path, e))?;
    serde_json::from_str(&strict_json(&text)).map_err(|e| TablesError::document(path, format!("invalid JSON: {e}")))
}

/// Hugging Face configs are written by Python's `json`, which emits the
/// non-standard tokens `NaN`, `Infinity` and `-Infinity`. None of the fields
/// read here can hold them, so outside string literals they become `null`.
fn strict_json(text: &str) -> std::borrow::Cow<'_, str> {
    const TOKENS: [&str; 3] = ["-Infinity", "Infinity", "NaN"];
    if !TOKENS.iter().any(|t| text.contains(t)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            in_string = c != '"' || escaped;
            escaped = c == '\\' && !escaped;
        } else if c == '"' {
            in_string = true;
        } else if let Some(t) = TOKENS.iter().find(|t| rest.starts_with(*t)) {
            out.push_str("null");
            rest = &rest[t.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::strict_json;

    #[test]
    fn python_json_tokens_become_null_outside_strings() {
        let text = r#"{"a": [0.0, Infinity, -Infinity, NaN], "b": "NaN \" Infinity"}"#;
        let strict = strict_json(text);
        assert_eq!(strict, r#"{"a": [0.0, null, null, null], "b": "NaN \" Infinity"}"#);
        assert!(serde_json::from_str::<serde_json::Value>(&strict).is_ok());
    }
}
