//! Session settings in the `aic` namespace (`SET aic.on_miss = 'error'`).
//!
//! Written by hand rather than with `extensions_options!`: that macro lists
//! its entries without the `aic.` prefix, so `SHOW aic.on_miss` and
//! `information_schema.df_settings` would not find them; and values are
//! checked when they are SET, not when a function first reads them.

use std::any::Any;
use std::fmt;
use std::str::FromStr;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ConfigOptions, ExtensionOptions};
use datafusion::common::{Result, config_err};

use aicsql_serving::{Images, KvSizing, NextN};

use crate::options::image_count;
use aicsql_tables::step::QuantOverrides;

/// What a data miss (the spec raises) turns into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnMiss {
    /// The function returns NULL (default).
    #[default]
    Null,
    /// The query fails with the miss's reason.
    Error,
}

impl fmt::Display for OnMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OnMiss::Null => "null",
            OnMiss::Error => "error",
        })
    }
}

/// Settings of the aicsql estimators.
#[derive(Debug, Clone, PartialEq)]
pub struct AicOptions {
    /// Backend used when a database argument names only a system (`'h200_sxm'`).
    pub backend: String,
    /// Version used when a database argument names no version; `latest` is the
    /// newest (PEP 440) version that has the table.
    pub version: String,
    /// What a data miss returns: `null` or `error`.
    pub on_miss: OnMiss,
    /// Union a table with older versions of the same backend (the spec's
    /// default SILICON behaviour); `false` reads the database's own file only.
    pub shared_layer: bool,
    /// Best configs a search keeps per mode (the spec's `top_n`).
    pub top_n: usize,
    /// A search drops candidates above its TPOT limit before the frontier
    /// and the picks (the spec's `strict_sla`).
    pub strict_sla: bool,
    /// The agg search's context-token budgets are not aligned to isl (the
    /// spec's `cli default --enable-chunked-prefill`).
    pub enable_chunked_prefill: bool,
    /// A search's end-to-end request-latency target in ms (the spec's
    /// `--request-latency`; `None`: the TPOT sweep).
    pub request_latency_ms: Option<f64>,
    /// The system of a disaggregated deployment's decode workers (the
    /// spec's `--decode-system`; empty: the prefill's).
    pub decode_system: String,
    /// Quant modes in place of the checkpoint's (`aic.gemm_quant` ...
    /// `aic.comm_quant`; empty: the checkpoint's), under a row's options.
    pub quant: QuantOverrides,
    /// TRT-LLM's KV-cache knobs (`aic.max_seq_len`,
    /// `aic.free_gpu_memory_fraction`; empty: the spec's defaults).
    pub kv_sizing: KvSizing,
    /// MTP speculative decoding (`aic.nextn`, `aic.nextn_accepted`; off by
    /// default), under a row's options.
    pub nextn: NextN,
    pub nextn_accepted: Option<f64>,
    /// Images per request of vision-language models (`aic.image_height`,
    /// `aic.image_width`, `aic.num_images`, `aic.enable_encoder_dp`), the
    /// estimates only; under a row's options.
    pub images: Images,
}

impl Default for AicOptions {
    fn default() -> Self {
        Self {
            backend: String::new(),
            version: "latest".into(),
            on_miss: OnMiss::Null,
            shared_layer: true,
            top_n: 5,
            strict_sla: false,
            enable_chunked_prefill: false,
            request_latency_ms: None,
            decode_system: String::new(),
            quant: QuantOverrides::default(),
            kv_sizing: KvSizing::default(),
            nextn: NextN::Off,
            nextn_accepted: None,
            images: Images::default(),
        }
    }
}

/// The largest `aic.top_n` (a search keeps one best config per layout).
const MAX_TOP_N: usize = 1000;

const DESCRIPTIONS: [(&str, &str); 22] = [
    (
        "backend",
        "Backend used when a database argument names only a system, e.g. 'vllm'. Empty: the argument must name it.",
    ),
    (
        "version",
        "Version used when a database argument names no version; 'latest' is the newest (PEP 440) version that has the table.",
    ),
    ("on_miss", "What a data miss returns: 'null' (default) or 'error'."),
    (
        "shared_layer",
        "Union a table with strictly older versions of the same backend, as the spec's SILICON mode does (default true); false reads the database's own file only.",
    ),
    ("top_n", "Best configs a search keeps per mode (the spec's top_n, default 5)."),
    (
        "strict_sla",
        "Searches drop candidates above the TPOT limit before the Pareto front and the best configs (the spec's strict_sla, default false).",
    ),
    (
        "enable_chunked_prefill",
        "The agg search walks context-token budgets in steps of 512 instead of multiples of isl (the spec's cli default --enable-chunked-prefill, default false); the estimates have no such notion and ignore it.",
    ),
    (
        "request_latency",
        "A search's end-to-end request-latency target in ms (the spec's cli default --request-latency): the sweeps run (TTFT, TPOT) pairs under it instead of the TPOT list, the Pareto front is against request latency and the best configs are those within it (the search's tpot_ms is then unused). Empty or 0 (default): none.",
    ),
    (
        "decode_system",
        "The system of a disaggregated deployment's decode workers (the spec's --decode-system), e.g. 'b200_sxm': estimate_disagg, search_disagg, search_default and search_best price prefill workers on the database's system and decode workers on this one, each with its own data, memory and search lists, on the same backend, at the same version when the database names one and at the decode system's latest otherwise. Empty (default): the database's system.",
    ),
    (
        "gemm_quant",
        "GEMM quant mode the estimators price in place of the checkpoint's (the spec's --gemm-quant-mode); empty (default): the checkpoint's. A row's options argument overrides it.",
    ),
    ("moe_quant", "MoE quant mode in place of the checkpoint's (--moe-quant-mode); empty: the checkpoint's."),
    (
        "kvcache_quant",
        "KV-cache quant mode in place of the checkpoint's (--kvcache-quant-mode); empty: the checkpoint's.",
    ),
    (
        "fmha_quant",
        "Context-attention (FMHA) quant mode in place of the checkpoint's (--fmha-quant-mode); empty: the checkpoint's.",
    ),
    ("comm_quant", "Communication quant mode label (--comm-quant-mode: half, int8, fp8); empty: half."),
    (
        "max_seq_len",
        "TRT-LLM aggregated deployments: the sequence length the KV cache is sized for (--max-seq-len); empty: isl + osl.",
    ),
    (
        "free_gpu_memory_fraction",
        "TRT-LLM aggregated deployments: the share of free GPU memory the KV cache may take, in (0, 1] (--free-gpu-memory-fraction); empty: 0.9.",
    ),
    (
        "nextn",
        "MTP speculative decoding: draft tokens per decode step (--nextn), an integer or 'auto' (the checkpoint's num_nextn_predict_layers); empty or 0 (default): off.",
    ),
    (
        "nextn_accepted",
        "MTP: average accepted draft tokens per decode step, in [0, nextn] (--nextn-accepted); required when nextn > 0, ignored otherwise.",
    ),
    (
        "image_height",
        "Vision-language models (Qwen3-VL): the height in pixels of each image of a request (--image-height); the estimates and searches add the image encoder and the images' tokens. Empty or 0 (default): no image.",
    ),
    ("image_width", "The width in pixels of each image (--image-width); empty or 0 (default): no image."),
    ("num_images", "Images per request (--num-images); empty: 1."),
    (
        "enable_encoder_dp",
        "Each GPU of a worker encodes its share of the images with the whole encoder (the spec's default, true); false shards the encoder over tp (--disable-encoder-dp).",
    ),
];

impl AicOptions {
    /// The session's `aic.*` settings: the registered extension, or entries
    /// named `aic.*` in a foreign extension (datafusion-python carries a
    /// library's settings across the FFI boundary as one string map, so they
    /// arrive untyped and are checked here), or the defaults.
    pub fn from_config(config: &ConfigOptions) -> Result<AicOptions> {
        if let Some(local) = config.extensions.get::<AicOptions>() {
            return Ok(local.clone());
        }
        let mut options = AicOptions::default();
        for (_, extension) in config.extensions.iter() {
            for entry in extension.entries() {
                if let (Some(key), Some(value)) = (entry.key.strip_prefix("aic."), entry.value.as_deref()) {
                    options.set(key, value)?;
                }
            }
        }
        Ok(options)
    }
}

/// A quant-mode setting: empty is the checkpoint's mode, else one of the
/// spec's names (exact, as the spec looks them up).
fn quant_setting<Q: FromStr<Err = aicsql_tables::TablesError>>(key: &str, value: &str) -> Result<Option<Q>> {
    if value.is_empty() {
        return Ok(None);
    }
    value.parse::<Q>().map(Some).or_else(|e| config_err!("aic.{key}: {e}"))
}

/// A boolean setting: true / on / 1 or false / off / 0.
fn flag(key: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "on" | "1" => Ok(true),
        "false" | "off" | "0" => Ok(false),
        other => config_err!("aic.{key} must be true or false, not '{other}'"),
    }
}

impl ConfigExtension for AicOptions {
    const PREFIX: &'static str = "aic";
}

impl ExtensionOptions for AicOptions {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        match key {
            "backend" => self.backend = value.to_string(),
            "decode_system" => self.decode_system = value.to_string(),
            "version" => {
                if value.is_empty() {
                    return config_err!("aic.version cannot be empty; use 'latest' or a version such as '0.19.0'");
                }
                self.version = value.to_string()
            }
            "on_miss" => {
                self.on_miss = match value.to_ascii_lowercase().as_str() {
                    "null" => OnMiss::Null,
                    "error" => OnMiss::Error,
                    other => return config_err!("aic.on_miss must be 'null' or 'error', not '{other}'"),
                }
            }
            "shared_layer" => self.shared_layer = flag("shared_layer", value)?,
            "strict_sla" => self.strict_sla = flag("strict_sla", value)?,
            "enable_chunked_prefill" => self.enable_chunked_prefill = flag("enable_chunked_prefill", value)?,
            "request_latency" => {
                self.request_latency_ms = match value.trim() {
                    "" => None,
                    v => match v.parse::<f64>() {
                        Ok(ms) if ms.is_finite() => (ms > 0.0).then_some(ms),
                        _ => {
                            return config_err!(
                                "aic.request_latency must be a number of ms (empty or 0: none), not '{value}'"
                            );
                        }
                    },
                }
            }
            "top_n" => {
                self.top_n = match value.parse::<usize>() {
                    Ok(n) if (1..=MAX_TOP_N).contains(&n) => n,
                    _ => return config_err!("aic.top_n must be an integer from 1 to {MAX_TOP_N}, not '{value}'"),
                }
            }
            "gemm_quant" => self.quant.gemm = quant_setting(key, value)?,
            "moe_quant" => self.quant.moe = quant_setting(key, value)?,
            "kvcache_quant" => self.quant.kv = quant_setting(key, value)?,
            "fmha_quant" => self.quant.fmha = quant_setting(key, value)?,
            "comm_quant" => self.quant.comm = quant_setting(key, value)?,
            "max_seq_len" => {
                self.kv_sizing.max_seq_len = match value {
                    "" => None,
                    v => match v.parse::<i64>().ok().and_then(crate::options::valid_length) {
                        Some(n) => Some(n),
                        None => {
                            return config_err!("aic.max_seq_len must be an integer from 1 to {}, not '{v}'", u32::MAX);
                        }
                    },
                }
            }
            "free_gpu_memory_fraction" => {
                self.kv_sizing.free_gpu_memory_fraction = match value {
                    "" => None,
                    v => match v.parse::<f64>().ok().and_then(crate::options::valid_fraction) {
                        Some(f) => Some(f),
                        None => {
                            return config_err!("aic.free_gpu_memory_fraction must be a number in (0, 1], not '{v}'");
                        }
                    },
                }
            }
            "nextn" => {
                self.nextn = match value {
                    "" => NextN::Off,
                    v => NextN::parse(v)
                        .map_err(|e| datafusion::common::DataFusionError::Configuration(format!("aic.nextn: {e}")))?,
                }
            }
            "image_height" | "image_width" | "num_images" => {
                let value = match value {
                    "" if key == "num_images" => 1,
                    "" => 0,
                    v => match v.parse::<i64>().map_err(|e| e.to_string()).and_then(|n| image_count(key, n)) {
                        Ok(n) => n,
                        Err(e) => return config_err!("aic.{key} = '{v}': {e}"),
                    },
                };
                match key {
                    "image_height" => self.images.height = value,
                    "image_width" => self.images.width = value,
                    _ => self.images.count = value,
                }
            }
            "enable_encoder_dp" => self.images.encoder_dp = value.is_empty() || flag("enable_encoder_dp", value)?,
            "nextn_accepted" => {
                self.nextn_accepted = match value {
                    "" => None,
                    v => match v.parse::<f64>().ok().filter(|a| a.is_finite() && *a >= 0.0) {
                        Some(a) => Some(a),
                        None => return config_err!("aic.nextn_accepted must be a number >= 0, not '{v}'"),
                    },
                }
            }
            other => {
                let known: Vec<String> = DESCRIPTIONS.iter().map(|(k, _)| format!("aic.{k}")).collect();
                return config_err!("unknown setting aic.{other}; aicsql has {}", known.join(", "));
            }
        }
        Ok(())
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        DESCRIPTIONS
            .iter()
            .map(|(key, description)| ConfigEntry {
                key: format!("aic.{key}"),
                value: Some(match *key {
                    "backend" => self.backend.clone(),
                    "version" => self.version.clone(),
                    "on_miss" => self.on_miss.to_string(),
                    "top_n" => self.top_n.to_string(),
                    "strict_sla" => self.strict_sla.to_string(),
                    "enable_chunked_prefill" => self.enable_chunked_prefill.to_string(),
                    "request_latency" => self.request_latency_ms.map(|ms| ms.to_string()).unwrap_or_default(),
                    "decode_system" => self.decode_system.clone(),
                    "gemm_quant" => self.quant.gemm.map(|q| q.name().to_string()).unwrap_or_default(),
                    "moe_quant" => self.quant.moe.map(|q| q.name().to_string()).unwrap_or_default(),
                    "kvcache_quant" => self.quant.kv.map(|q| q.name().to_string()).unwrap_or_default(),
                    "fmha_quant" => self.quant.fmha.map(|q| q.name().to_string()).unwrap_or_default(),
                    "comm_quant" => self.quant.comm.map(|q| q.name().to_string()).unwrap_or_default(),
                    "max_seq_len" => self.kv_sizing.max_seq_len.map(|n| n.to_string()).unwrap_or_default(),
                    "free_gpu_memory_fraction" => {
                        self.kv_sizing.free_gpu_memory_fraction.map(|f| f.to_string()).unwrap_or_default()
                    }
                    "nextn" => match self.nextn {
                        NextN::Off => String::new(),
                        NextN::Depth(n) => n.to_string(),
                        NextN::Auto => "auto".into(),
                    },
                    "nextn_accepted" => self.nextn_accepted.map(|a| a.to_string()).unwrap_or_default(),
                    "image_height" => self.images.height.to_string(),
                    "image_width" => self.images.width.to_string(),
                    "num_images" => self.images.count.to_string(),
                    "enable_encoder_dp" => self.images.encoder_dp.to_string(),
                    _ => self.shared_layer.to_string(),
                }),
                description,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_list_with_prefix() {
        let mut o = AicOptions::default();
        o.set("on_miss", "ERROR").expect("valid");
        o.set("shared_layer", "false").expect("valid");
        assert_eq!(o.on_miss, OnMiss::Error);
        assert!(!o.shared_layer);
        assert!(o.set("on_miss", "zero").unwrap_err().to_string().contains("'null' or 'error'"));
        assert!(o.set("nope", "1").unwrap_err().to_string().contains("aic.on_miss"));
        let keys: Vec<String> = o.entries().into_iter().map(|e| e.key).collect();
        assert_eq!(
            keys,
            [
                "aic.backend",
                "aic.version",
                "aic.on_miss",
                "aic.shared_layer",
                "aic.top_n",
                "aic.strict_sla",
                "aic.enable_chunked_prefill",
                "aic.request_latency",
                "aic.decode_system",
                "aic.gemm_quant",
                "aic.moe_quant",
                "aic.kvcache_quant",
                "aic.fmha_quant",
                "aic.comm_quant",
                "aic.max_seq_len",
                "aic.free_gpu_memory_fraction",
                "aic.nextn",
                "aic.nextn_accepted",
                "aic.image_height",
                "aic.image_width",
                "aic.num_images",
                "aic.enable_encoder_dp"
            ]
        );
        o.set("kvcache_quant", "fp8").expect("valid");
        assert_eq!(o.quant.kv, Some(aicsql_tables::modes::KvQuant::Fp8));
        let err = o.set("gemm_quant", "fp4").unwrap_err().to_string();
        assert!(err.contains("aic.gemm_quant") && err.contains("'fp4'") && err.contains("fp8_block"), "{err}");
        o.set("kvcache_quant", "").expect("valid");
        assert_eq!(o.quant, QuantOverrides::default());
        o.set("top_n", "3").expect("valid");
        assert_eq!(o.top_n, 3);
        assert!(o.set("top_n", "0").unwrap_err().to_string().contains("from 1"));
        assert!(o.set("strict_sla", "maybe").unwrap_err().to_string().contains("true or false"));
    }

    /// A foreign extension (how datafusion-python hands over settings)
    /// holds full `aic.*` keys as strings; they are parsed and checked.
    #[derive(Debug, Clone, Default)]
    struct Foreign(Vec<(String, String)>);

    impl ConfigExtension for Foreign {
        const PREFIX: &'static str = "foreign";
    }

    impl ExtensionOptions for Foreign {
        fn as_any(&self) -> &dyn Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }
        fn cloned(&self) -> Box<dyn ExtensionOptions> {
            Box::new(self.clone())
        }
        fn set(&mut self, key: &str, value: &str) -> Result<()> {
            self.0.push((key.to_string(), value.to_string()));
            Ok(())
        }
        fn entries(&self) -> Vec<ConfigEntry> {
            self.0
                .iter()
                .map(|(k, v)| ConfigEntry { key: k.clone(), value: Some(v.clone()), description: "" })
                .collect()
        }
    }

    #[test]
    fn settings_come_from_a_foreign_extension() {
        let mut config = ConfigOptions::default();
        assert_eq!(AicOptions::from_config(&config).expect("defaults"), AicOptions::default());
        let mut foreign = Foreign::default();
        foreign.set("aic.shared_layer", "false").expect("stored");
        foreign.set("aic.backend", "vllm").expect("stored");
        foreign.set("other.key", "x").expect("stored");
        config.extensions.insert(foreign.clone());
        let options = AicOptions::from_config(&config).expect("valid");
        assert!(!options.shared_layer);
        assert_eq!(options.backend, "vllm");
        foreign.set("aic.on_miss", "zero").expect("stored");
        config.extensions.insert(foreign);
        let err = AicOptions::from_config(&config).unwrap_err().to_string();
        assert!(err.contains("'null' or 'error'"), "{err}");
    }
}
