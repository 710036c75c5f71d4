//! The model as the engine step sees it (docs/spec section 2, 10.1): dimensions
//! from the HF config, the family that decides the op list, and the
//! per-GPU split for a tensor-parallel size.

use std::sync::Arc;

use crate::discovery::DataTree;
use crate::error::TablesError;
use crate::model::{ModelConfig, read_model_config};
use crate::step::StepShape;
use crate::step::dsv4::Dsv4;
use crate::step::dsv32::Dsa;
use crate::step::gemma4::Gemma4;
use crate::step::hybrid::Hybrid;
use crate::step::nemotron_h::NemotronH;
use crate::step::nemotron_nas::NemotronNas;
use crate::step::qwen35::Qwen35;
use crate::step::types::StepError;

/// Op-list builders of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// LLAMA, and QWEN3VL on the text path (its builder is LLAMA's).
    Llama,
    /// MOE (GPT-OSS among them), and QWEN3VL_MOE on the text path.
    Moe,
    /// Llama-4 and MiMo-V2-Flash (docs/spec/families_hybrid_vl_databases.md 1).
    HybridMoe,
    /// DEEPSEEK and KIMIK25: MLA attention, MoE plus a shared expert
    /// (docs/spec/families_mla_gptoss_fp8static.md 3).
    Mla,
    /// Qwen3.5: gated-delta-net and full-attention layers, dense or MoE
    /// (docs/spec/families_qwen35_gemma4.md 1).
    Qwen35,
    /// Gemma 4: sliding-window and global layers, shared MLP plus experts
    /// (docs/spec/families_qwen35_gemma4.md 3).
    Gemma4,
    /// Nemotron-H: Mamba-2, attention, MoE and MLP layers
    /// (docs/spec/families_nemotron.md 1).
    NemotronH,
    /// Nemotron-NAS: per-layer heterogeneous blocks merged into runs
    /// (docs/spec/families_nemotron.md 2).
    NemotronNas,
    /// DeepSeek-V3.2 and GLM-5: DSA module layers, a shared expert and
    /// routed experts (docs/spec/families_dsa.md).
    Dsa,
    /// DeepSeek-V4: mHC-wrapped layers of compressed attention modules, a
    /// shared expert and routed experts (docs/spec/families_dsv4.md).
    Dsv4,
}

/// The spec's families this crate does not build yet: refused by name.
const LATER_FAMILIES: [&str; 1] = ["MINIMAXM3"];

/// The dimensions the op lists use, with the spec's fallbacks applied.
#[derive(Debug, Clone)]
pub(crate) struct ModelDesc {
    pub architecture: String,
    pub family: Family,
    pub layers: i64,
    pub hidden: i64,
    pub heads: i64,
    pub kv_heads: i64,
    pub head_dim: i64,
    pub inter: i64,
    pub vocab: i64,
    pub topk: i64,
    pub experts: i64,
    pub moe_inter: i64,
    pub use_qk_norm: bool,
    /// MoE workload distribution of the family's builder.
    pub distribution: &'static str,
    /// GPT-OSS: half the layers are priced with a 128-token sliding window
    /// (families_mla_gptoss_fp8static.md 4).
    pub gpt_oss: bool,
    /// HYBRIDMOE's layer patterns and SWA dimensions.
    pub hybrid: Option<Hybrid>,
    /// NEMOTRONH's layer counts and Mamba-2 shape.
    pub nemotron_h: Option<NemotronH>,
    /// NEMOTRONNAS's block groups.
    pub nemotron_nas: Option<NemotronNas>,
    /// DEEPSEEKV32's DSA description.
    pub dsa: Option<Dsa>,
    /// DEEPSEEKV4's attention groups, ranks and mHC shape.
    pub dsv4: Option<Dsv4>,
    /// QWEN35's layer counts and GDN shape.
    pub qwen35: Option<Qwen35>,
    /// GEMMA4MIX's layer counts and per-type attention.
    pub gemma4: Option<Gemma4>,
    /// DEEPSEEK / KIMIK25: `v_head_dim` (0 when absent), the head size of
    /// vllm's attention fallback.
    pub v_head_dim: i64,
    /// MOE / HYBRIDMOE: the fp8 block size of a block-quantised checkpoint
    /// (`weight_block_size[0]`, 128 when absent), which the per-GPU expert
    /// width must be a multiple of.
    pub moe_block: Option<i64>,
    /// The spec's family name (`LLAMA`, `QWEN3VL`, `MOE`, ...).
    pub spec_family: &'static str,
    /// DEEPSEEK / KIMIK25: `kv_lora_rank + qk_rope_head_dim` (512 and 64
    /// when absent or 0), the latent KV a token keeps per layer.
    pub mla_kv_width: i64,
    /// QWEN3VL / QWEN3VL_MOE with a `vision_config`: the image encoder.
    pub vision: Option<crate::step::vision::Vision>,
}

/// Per-GPU split of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parallel {
    pub tp: i64,
    /// Pipeline stages (`pp - 1` hand-offs per step).
    pub pp: i64,
    /// Attention data parallelism (ranks that each run attention on their
    /// own requests and share the experts).
    pub dp: i64,
    /// Context-parallel ranks splitting a prefill's tokens.
    pub cp: i64,
    /// Attention heads per GPU, `H // tp`.
    pub n: i64,
    /// KV heads per GPU, `ceil(Hkv / tp)`.
    pub n_kv: i64,
    pub moe_tp: i64,
    pub moe_ep: i64,
    /// The backend is vllm (DEEPSEEK / KIMIK25 build other ops there).
    pub vllm: bool,
    /// The backend is sglang (GLM-5.2 amortises its skip-indexer layers there).
    pub sglang: bool,
}

/// The model config of `model` (`Org/Name`), parsed once per process.
pub(crate) fn model_config(tree: &DataTree, model: &str) -> Result<Arc<ModelConfig>, StepError> {
    let stem = format!("{}_config", model.replacen('/', "--", 1));
    let doc = tree.model_configs().iter().find(|d| d.stem == stem).ok_or_else(|| {
        StepError::input(format!("unknown model '{model}': no model_configs/{stem}.json in the mounted data"))
    })?;
    Ok(tree.cache().model_configs.get(model.to_string(), || read_model_config(doc))?)
}

impl ModelDesc {
    pub fn from_config(cfg: &ModelConfig) -> Result<ModelDesc, StepError> {
        let architecture = cfg.architecture.clone().unwrap_or_default();
        let family = match cfg.family {
            Some("LLAMA" | "QWEN3VL") => Family::Llama,
            Some("MOE" | "QWEN3VL_MOE") => Family::Moe,
            Some("HYBRIDMOE") => Family::HybridMoe,
            Some("DEEPSEEK" | "KIMIK25") => Family::Mla,
            Some("QWEN35") => Family::Qwen35,
            Some("GEMMA4MIX") => Family::Gemma4,
            Some("NEMOTRONH") => Family::NemotronH,
            Some("NEMOTRONNAS") => Family::NemotronNas,
            Some("DEEPSEEKV32") => Family::Dsa,
            Some("DEEPSEEKV4") => Family::Dsv4,
            Some(later) if LATER_FAMILIES.contains(&later) => {
                return Err(StepError::input(format!(
                    "unsupported architecture {architecture}: the spec's {later} family is not implemented yet"
                )));
            }
            _ => {
                let known: Vec<&str> = crate::model::ARCHITECTURES.iter().map(|(a, _)| *a).collect();
                return Err(StepError::input(format!(
                    "unsupported architecture {architecture}: the spec maps no model family to it (architectures: {})",
                    known.join(", ")
                )));
            }
        };
        let need = |value: Option<i64>, field: &str| {
            value.filter(|&v| v > 0).ok_or_else(|| {
                StepError::Data(TablesError::document(&cfg.path, format!("`{field}` must be a positive integer")))
            })
        };
        let heads = need(cfg.num_attention_heads, "num_attention_heads")?;
        let hidden = need(cfg.hidden_size, "hidden_size")?;
        // Nemotron-H's pattern decides its layers; the count only sizes the
        // memory and MTP, and falls back to the pattern's length.
        let nemotron_h = if family == Family::NemotronH { Some(NemotronH::from_config(cfg, hidden)?) } else { None };
        let layers = match (cfg.num_hidden_layers, nemotron_h) {
            (None, Some(nh)) if nh.pattern_len > 0 => nh.pattern_len,
            (given, _) => need(given, "num_hidden_layers")?,
        };
        let desc = ModelDesc {
            family,
            layers,
            hidden,
            heads,
            kv_heads: cfg.num_key_value_heads.unwrap_or(0),
            head_dim: cfg.head_dim.unwrap_or(hidden / heads),
            inter: cfg.intermediate_size.unwrap_or(0),
            vocab: need(cfg.vocab_size, "vocab_size")?,
            topk: cfg.num_experts_per_tok.unwrap_or(0),
            experts: cfg.num_experts.unwrap_or(0),
            moe_inter: cfg.moe_intermediate_size.or(cfg.intermediate_size).unwrap_or(0),
            use_qk_norm: cfg.use_qk_norm,
            distribution: if matches!(
                family,
                Family::HybridMoe | Family::Mla | Family::Gemma4 | Family::NemotronH | Family::Dsa | Family::Dsv4
            ) {
                "power_law_1.01"
            } else {
                "power_law_1.2"
            },
            gpt_oss: architecture == "GptOssForCausalLM",
            hybrid: None,
            nemotron_h: None,
            nemotron_nas: None,
            dsa: None,
            dsv4: None,
            qwen35: None,
            gemma4: None,
            v_head_dim: 0,
            moe_block: None,
            spec_family: cfg.family.unwrap_or_default(),
            mla_kv_width: 0,
            vision: match &cfg.vision {
                Some(v) => Some(crate::step::vision::Vision::from_config(v, &cfg.path)?),
                None => None,
            },
            architecture,
        };
        let mut desc = desc;
        if family == Family::HybridMoe {
            desc.hybrid = Some(Hybrid::from_config(cfg, desc.layers)?);
        }
        desc.nemotron_h = nemotron_h;
        if family == Family::Dsa {
            desc.dsa = Some(Dsa::from_config(cfg, &desc.architecture, desc.layers)?);
        }
        if family == Family::Dsv4 {
            desc.dsv4 = Some(Dsv4::from_config(cfg, desc.layers)?);
        }
        if family == Family::NemotronNas {
            desc.nemotron_nas = Some(NemotronNas::from_config(cfg, &desc.architecture, desc.hidden)?);
        }
        if family == Family::Qwen35 {
            desc.qwen35 = Some(Qwen35::from_config(cfg, desc.layers, desc.hidden)?);
        }
        if family == Family::Gemma4 {
            let mut gemma = Gemma4::from_config(cfg, desc.layers)?;
            // `enable_moe_block` is not read: dense iff no top-k or no experts.
            gemma.dense = desc.topk < 1 || desc.experts < 1;
            desc.gemma4 = Some(gemma);
        }
        if family == Family::Mla {
            desc.v_head_dim = cfg.int("v_head_dim").map_err(StepError::Data)?.unwrap_or(0);
            let or_default = |field: &str, default: i64| -> Result<i64, StepError> {
                Ok(cfg.int(field).map_err(StepError::Data)?.filter(|&v| v != 0).unwrap_or(default))
            };
            desc.mla_kv_width = or_default("kv_lora_rank", 512)? + or_default("qk_rope_head_dim", 64)?;
        }
        if matches!(family, Family::Moe | Family::HybridMoe) {
            let block =
                cfg.quantization_config.get("weight_block_size").and_then(|b| b.get(0)).and_then(|b| b.as_i64());
            desc.moe_block = Some(block.unwrap_or(128));
        }
        // A dense Qwen3.5 is no MoE model, a dense Gemma 4 a MoE-family model
        // without experts; every other family but LLAMA needs experts.
        let dense = (family == Family::Qwen35 && desc.experts == 0)
            || desc.gemma4.is_some_and(|g| g.dense)
            || desc.nemotron_h.is_some_and(|nh| nh.moe == 0);
        if !matches!(desc.family, Family::Llama | Family::NemotronNas) && !dense && (desc.topk < 1 || desc.experts < 1)
        {
            return Err(StepError::input(format!(
                "{}: a MoE model needs num_experts_per_tok and a number of experts",
                cfg.path.display()
            )));
        }
        Ok(desc)
    }

    /// MOE and HYBRIDMOE refuse an fp8_block MoE whose per-GPU expert width is not
    /// a multiple of the checkpoint's block (the spec's message, its
    /// trailing space included).
    pub fn check_moe_blocks(&self, par: &Parallel, moe: crate::modes::MoeQuant) -> Result<(), StepError> {
        let Some(block) = self.moe_block.filter(|b| *b > 0) else { return Ok(()) };
        if moe == crate::modes::MoeQuant::Fp8Block && (self.moe_inter / par.moe_tp) % block != 0 {
            return Err(StepError::Refused(format!(
                "Invalid quantized MoE configuration: (moe_intermediate_size={} / moe_tp_size={}) % weight_block_size={block} != 0. ",
                self.moe_inter, par.moe_tp
            )));
        }
        Ok(())
    }

    pub fn is_moe(&self) -> bool {
        match self.family {
            Family::Llama | Family::NemotronNas => false,
            Family::Qwen35 => self.experts > 0,
            // MoE iff the pattern has MoE layers (Nemotron-H-56B has none).
            Family::NemotronH => self.nemotron_h.is_some_and(|nh| nh.moe > 0),
            _ => true,
        }
    }

    /// Splits the model over `tp` GPUs per attention-data-parallel rank,
    /// `dp` ranks, `cp` context-parallel ranks and `pp` pipeline stages.
    /// MoE models need `tp * dp * cp == moe_tp * moe_ep` (one of them may be
    /// given; the other is inferred); dense models ignore both. Attention
    /// data parallelism (`dp > 1`) is priced for every MoE family; context
    /// parallelism on sglang with `tp = dp = 1`, where the spec supports it
    /// (`supports_cp`: every family but QWEN35, NEMOTRONH and NEMOTRONNAS).
    pub fn parallel(&self, shape: &StepShape, backend: &str) -> Result<Parallel, StepError> {
        let tp = i64::from(shape.tp);
        if tp < 1 {
            return Err(StepError::input(format!("tp must be at least 1, found {tp}")));
        }
        let (pp, dp, cp) = (i64::from(shape.pp), i64::from(shape.dp), i64::from(shape.cp));
        for (value, name) in [(pp, "pp"), (dp, "attention dp"), (cp, "cp")] {
            if value < 1 {
                return Err(StepError::input(format!("{name} must be at least 1, found {value}")));
            }
        }
        if dp > 1 && !self.is_moe() {
            return Err(StepError::input(format!(
                "attention dp {dp} > 1 needs a MoE model (tp * dp * cp == moe_tp * moe_ep); {} is {}",
                self.architecture, self.spec_family
            )));
        }
        if dp > 1 && tp > 1 && backend == "trtllm" {
            return Err(StepError::input(format!(
                "trtllm does not support attention tp {tp} > 1 and attention dp {dp} > 1 together"
            )));
        }
        if cp > 1 && matches!(self.family, Family::Qwen35 | Family::NemotronH | Family::NemotronNas) {
            // The spec's model classes of these families do not declare `supports_cp`.
            return Err(StepError::input(format!(
                "Context parallelism (cp_size={cp}) is not supported for model_family='{}' on backend='{backend}'. \
                 The model class must override ``supports_cp`` and implement CP in its op pipeline.",
                self.spec_family
            )));
        }
        if cp > 1 {
            if backend != "sglang" {
                return Err(StepError::input(format!(
                    "context parallelism (cp {cp}) is not supported for {} ({}) on backend '{backend}': the spec models it on sglang only",
                    self.architecture, self.spec_family
                )));
            }
            if tp != 1 || dp != 1 {
                return Err(StepError::input(format!(
                    "sglang context parallelism needs tp 1 and attention dp 1 (CP and attention TP/DP exclude each other), got tp {tp}, dp {dp}, cp {cp}"
                )));
            }
        }
        let width = tp * dp * cp;
        if self.heads % tp != 0 {
            return Err(StepError::input(format!("num_attention_heads {} is not divisible by tp {tp}", self.heads)));
        }
        let (moe_tp, moe_ep) = if self.is_moe() {
            let positive = |v: u32, name: &str| {
                if v == 0 { Err(StepError::input(format!("{name} must be at least 1"))) } else { Ok(i64::from(v)) }
            };
            let infer = |given: i64, given_name: &str| {
                if width % given != 0 {
                    Err(StepError::input(format!(
                        "tp {tp} * dp {dp} * cp {cp} = {width} is not divisible by {given_name} {given}"
                    )))
                } else {
                    Ok(width / given)
                }
            };
            let (etp, eep) = match (shape.moe_tp, shape.moe_ep) {
                (None, None) => {
                    return Err(StepError::input(format!(
                        "{} is a MoE model: give moe_tp and/or moe_ep (tp * dp * cp == moe_tp * moe_ep)",
                        self.architecture
                    )));
                }
                (Some(etp), None) => {
                    let etp = positive(etp, "moe_tp")?;
                    (etp, infer(etp, "moe_tp")?)
                }
                (None, Some(eep)) => {
                    let eep = positive(eep, "moe_ep")?;
                    (infer(eep, "moe_ep")?, eep)
                }
                (Some(etp), Some(eep)) => (positive(etp, "moe_tp")?, positive(eep, "moe_ep")?),
            };
            if etp * eep != width {
                return Err(StepError::input(format!(
                    "moe_tp {etp} * moe_ep {eep} = {} must equal tp {tp} * dp {dp} * cp {cp} = {width}",
                    etp * eep
                )));
            }
            if self.gemma4.is_some_and(|g| g.dense) {
                if eep != 1 {
                    return Err(StepError::input(format!("dense Gemma 4 variants require moe_ep_size=1, got {eep}")));
                }
            } else if self.family != Family::NemotronH && self.experts < eep {
                return Err(StepError::input(format!(
                    "moe_ep {eep} is larger than the {} experts of {}",
                    self.experts, self.architecture
                )));
            }
            if backend == "vllm" && etp > 1 && eep > 1 {
                return Err(StepError::input(format!(
                    "vllm does not support moe_tp {etp} and moe_ep {eep} both above 1"
                )));
            }
            (etp, eep)
        } else {
            (1, 1)
        };
        Ok(Parallel {
            tp,
            pp,
            dp,
            cp,
            n: self.heads / tp,
            n_kv: (self.kv_heads + tp - 1).div_euclid(tp),
            moe_tp,
            moe_ep,
            vllm: backend == "vllm",
            sglang: backend == "sglang",
        })
    }
}
