//! Model descriptions from Hugging Face `config.json` files (docs/spec section 2).

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::discovery::DocFile;
use crate::error::{Result, TablesError};

/// Model families the spec's builders know.
pub fn family_of(architecture: &str) -> Option<&'static str> {
    match architecture {
        "LlamaForCausalLM" | "Qwen2ForCausalLM" | "Qwen3ForCausalLM" | "MiMoForCausalLM" => Some("LLAMA"),
        "MixtralForCausalLM"
        | "Qwen2MoeForCausalLM"
        | "Qwen3MoeForCausalLM"
        | "GptOssForCausalLM"
        | "MiniMaxM2ForCausalLM" => Some("MOE"),
        "Llama4ForConditionalGeneration" => Some("HYBRIDMOE"),
        _ => None,
    }
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
    /// 0 when the config says null (spec: `Hkv` fallback).
    pub num_key_value_heads: Option<i64>,
    pub head_dim: Option<i64>,
    pub intermediate_size: Option<i64>,
    pub vocab_size: Option<i64>,
    pub num_experts: Option<i64>,
    pub num_experts_per_tok: Option<i64>,
    pub moe_intermediate_size: Option<i64>,
    /// `quantization_config.quant_method`, else the companion
    /// `_hf_quant_config.json`'s `quantization.quant_algo` (lower-cased).
    pub quant_method: Option<String>,
    /// `quantization_config.quant_algo` (lower-cased), which some
    /// checkpoints write instead of `quant_method`.
    pub quant_algo: Option<String>,
    /// `quantization_config.weight_block_size` is a non-empty list (block-scaled fp8).
    pub weight_block_size: bool,
    /// Activations are quantised dynamically: `activation_scheme: dynamic`,
    /// or a `config_groups` entry whose `input_activations.dynamic` is true.
    pub dynamic_activations: bool,
    /// The KV-cache quant algo (lower-cased): `quantization_config.kv_cache_scheme`
    /// / `kv_cache_quant_algo`, else the companion's `quantization.kv_cache_quant_algo`.
    pub kv_cache_quant_algo: Option<String>,
    pub use_qk_norm: bool,
    pub path: PathBuf,
}

/// Reads `model_configs/<org>--<name>_config.json` (and its `_hf_quant_config.json` companion).
pub fn read_model_config(doc: &DocFile) -> Result<ModelConfig> {
    let json = read_json(&doc.path)?;
    let base = doc.stem.strip_suffix("_config").unwrap_or(&doc.stem);
    let model = match base.split_once("--") {
        Some((org, name)) => format!("{org}/{name}"),
        None => base.to_string(),
    };
    // Multimodal configs keep the language model under `text_config`.
    let text = json.get("text_config").filter(|t| t.is_object());
    let get = |key: &str| -> Option<&Value> {
        json.get(key).filter(|v| !v.is_null()).or_else(|| text.and_then(|t| t.get(key)).filter(|v| !v.is_null()))
    };
    let int = |key: &str| -> Result<Option<i64>> {
        match get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| TablesError::document(&doc.path, format!("`{key}`: expected an integer, found {v}"))),
        }
    };
    let architecture = json.get("architectures").and_then(|a| a.get(0)).and_then(Value::as_str).map(str::to_string);
    let hidden_size = int("hidden_size")?;
    let heads = int("num_attention_heads")?;
    let head_dim = match int("head_dim")? {
        Some(d) => Some(d),
        None => match int("attention_head_dim")? {
            Some(d) => Some(d),
            None => match (hidden_size, heads) {
                (Some(h), Some(n)) if n > 0 => Some(h.div_euclid(n)),
                _ => None,
            },
        },
    };
    let has_kv_key = get("num_key_value_heads").is_some() || json.get("num_key_value_heads").is_some();
    let num_key_value_heads = match int("num_key_value_heads")? {
        Some(v) => Some(v),
        None if has_kv_key => Some(0),
        None => None,
    };
    let intermediate_size = int("intermediate_size")?;
    let num_experts = first_some(&[int("num_local_experts")?, int("n_routed_experts")?, int("num_experts")?]);
    let num_experts_per_tok = first_some(&[int("num_experts_per_tok")?, int("top_k_experts")?]);
    let moe_intermediate_size = int("moe_intermediate_size")?.or(intermediate_size);

    let mut quant_method =
        get("quantization_config").and_then(|q| q.get("quant_method")).and_then(Value::as_str).map(str::to_string);
    let qc = get("quantization_config");
    let lower = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_ascii_lowercase);
    let quant_algo = lower(qc.and_then(|q| q.get("quant_algo")));
    let weight_block_size =
        qc.and_then(|q| q.get("weight_block_size")).and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let dynamic_group = qc.and_then(|q| q.get("config_groups")).and_then(Value::as_object).is_some_and(|groups| {
        groups
            .values()
            .any(|g| g.get("input_activations").and_then(|a| a.get("dynamic")).and_then(Value::as_bool) == Some(true))
    });
    let dynamic_activations =
        lower(qc.and_then(|q| q.get("activation_scheme"))).as_deref() == Some("dynamic") || dynamic_group;
    let mut kv_cache_quant_algo = lower(qc.and_then(|q| q.get("kv_cache_scheme")))
        .or_else(|| lower(qc.and_then(|q| q.get("kv_cache_quant_algo"))));
    let companion = doc.path.with_file_name(format!("{base}_hf_quant_config.json"));
    if companion.is_file() {
        let hf = read_json(&companion)?;
        let section = hf.get("quantization");
        if let Some(algo) = section.and_then(|q| q.get("quant_algo")).and_then(Value::as_str)
            && (quant_method.is_none() || quant_method.as_deref() == Some("modelopt"))
        {
            quant_method = Some(algo.to_ascii_lowercase());
        }
        if kv_cache_quant_algo.is_none() {
            kv_cache_quant_algo = lower(section.and_then(|q| q.get("kv_cache_quant_algo")));
        }
    }
    let family = architecture.as_deref().and_then(family_of);
    let use_qk_norm =
        matches!(architecture.as_deref(), Some("Qwen3ForCausalLM" | "Qwen3MoeForCausalLM" | "MiniMaxM2ForCausalLM"));
    Ok(ModelConfig {
        model,
        architecture,
        family,
        num_hidden_layers: int("num_hidden_layers")?,
        hidden_size,
        num_attention_heads: heads,
        num_key_value_heads,
        head_dim,
        intermediate_size,
        vocab_size: int("vocab_size")?,
        num_experts,
        num_experts_per_tok,
        moe_intermediate_size,
        quant_method,
        quant_algo,
        weight_block_size,
        dynamic_activations,
        kv_cache_quant_algo,
        use_qk_norm,
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
            in_string = !(c == '"' && !escaped);
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
