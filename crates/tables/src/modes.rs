//! The non-GEMM quantisation modes of the spec (section 3): KV cache, FMHA
//! and MoE, each with the (memory, compute) numbers its SOL formulas use.
//! Numbers keep Python's types: `memory=2` is an int, `0.5625` a float.

use std::fmt;
use std::str::FromStr;

use crate::error::TablesError;
use crate::system::Num;

/// KV-cache element type (`kv_cache_dtype` in the tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KvQuant {
    Bfloat16,
    Fp8,
    Int8,
}

impl KvQuant {
    pub const ALL: [KvQuant; 3] = [KvQuant::Bfloat16, KvQuant::Fp8, KvQuant::Int8];

    pub fn name(self) -> &'static str {
        match self {
            KvQuant::Bfloat16 => "bfloat16",
            KvQuant::Fp8 => "fp8",
            KvQuant::Int8 => "int8",
        }
    }

    /// Bytes per element.
    pub fn memory(self) -> i64 {
        match self {
            KvQuant::Bfloat16 => 2,
            KvQuant::Fp8 | KvQuant::Int8 => 1,
        }
    }
}

/// Attention-kernel math type (`attn_dtype` in the context table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FmhaQuant {
    Bfloat16,
    Fp8,
    /// SGLang wide-EP's name in the spec's enum: no context-attention table
    /// carries it, so an explicit override of it misses there.
    Fp8Block,
}

impl FmhaQuant {
    pub const ALL: [FmhaQuant; 3] = [FmhaQuant::Bfloat16, FmhaQuant::Fp8, FmhaQuant::Fp8Block];

    pub fn name(self) -> &'static str {
        match self {
            FmhaQuant::Bfloat16 => "bfloat16",
            FmhaQuant::Fp8 => "fp8",
            FmhaQuant::Fp8Block => "fp8_block",
        }
    }

    pub fn memory(self) -> i64 {
        match self {
            FmhaQuant::Bfloat16 => 2,
            FmhaQuant::Fp8 | FmhaQuant::Fp8Block => 1,
        }
    }

    pub fn compute(self) -> i64 {
        match self {
            FmhaQuant::Bfloat16 => 1,
            FmhaQuant::Fp8 | FmhaQuant::Fp8Block => 2,
        }
    }
}

/// MoE expert-GEMM quant mode (`moe_dtype` in the MoE table), with the
/// spec's (memory bytes, compute multiplier) per mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MoeQuant {
    Bfloat16,
    Fp8,
    Int4Wo,
    Fp8Block,
    W4afp8,
    Nvfp4,
    /// GPT-OSS's native format: MXFP4 weights, 16-bit activations.
    W4a16Mxfp4,
    W4a8Mxfp4Mxfp8,
    W4a8Mxfp4Mxfp8Trtllm,
    W4a16Mxfp4Cutlass,
}

impl MoeQuant {
    pub const ALL: [MoeQuant; 10] = [
        MoeQuant::Bfloat16,
        MoeQuant::Fp8,
        MoeQuant::Int4Wo,
        MoeQuant::Fp8Block,
        MoeQuant::W4afp8,
        MoeQuant::Nvfp4,
        MoeQuant::W4a16Mxfp4,
        MoeQuant::W4a8Mxfp4Mxfp8,
        MoeQuant::W4a8Mxfp4Mxfp8Trtllm,
        MoeQuant::W4a16Mxfp4Cutlass,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MoeQuant::Bfloat16 => "bfloat16",
            MoeQuant::Fp8 => "fp8",
            MoeQuant::Int4Wo => "int4_wo",
            MoeQuant::Fp8Block => "fp8_block",
            MoeQuant::W4afp8 => "w4afp8",
            MoeQuant::Nvfp4 => "nvfp4",
            MoeQuant::W4a16Mxfp4 => "w4a16_mxfp4",
            MoeQuant::W4a8Mxfp4Mxfp8 => "w4a8_mxfp4_mxfp8",
            MoeQuant::W4a8Mxfp4Mxfp8Trtllm => "w4a8_mxfp4_mxfp8_trtllm",
            MoeQuant::W4a16Mxfp4Cutlass => "w4a16_mxfp4_cutlass",
        }
    }

    pub fn memory(self) -> Num {
        match self {
            MoeQuant::Bfloat16 => Num::Int(2),
            MoeQuant::Fp8 | MoeQuant::Fp8Block => Num::Int(1),
            MoeQuant::Nvfp4 => Num::Float(0.5625),
            MoeQuant::Int4Wo
            | MoeQuant::W4afp8
            | MoeQuant::W4a16Mxfp4
            | MoeQuant::W4a8Mxfp4Mxfp8
            | MoeQuant::W4a8Mxfp4Mxfp8Trtllm
            | MoeQuant::W4a16Mxfp4Cutlass => Num::Float(0.5),
        }
    }

    pub fn compute(self) -> i64 {
        match self {
            MoeQuant::Bfloat16 | MoeQuant::Int4Wo | MoeQuant::W4a16Mxfp4 | MoeQuant::W4a16Mxfp4Cutlass => 1,
            MoeQuant::Fp8
            | MoeQuant::Fp8Block
            | MoeQuant::W4afp8
            | MoeQuant::W4a8Mxfp4Mxfp8
            | MoeQuant::W4a8Mxfp4Mxfp8Trtllm => 2,
            MoeQuant::Nvfp4 => 4,
        }
    }
}

/// The communication quant mode (the spec's `CommQuantMode`). On the
/// estimate paths it only labels the result: the collectives it would
/// price (context-parallel all-gathers) keep `half` there
/// (docs/spec/options.md 1.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CommQuant {
    Half,
    Int8,
    Fp8,
}

impl CommQuant {
    pub const ALL: [CommQuant; 3] = [CommQuant::Half, CommQuant::Int8, CommQuant::Fp8];

    pub fn name(self) -> &'static str {
        match self {
            CommQuant::Half => "half",
            CommQuant::Int8 => "int8",
            CommQuant::Fp8 => "fp8",
        }
    }
}

macro_rules! named_enum {
    ($ty:ident, $what:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = TablesError;

            fn from_str(name: &str) -> Result<Self, Self::Err> {
                $ty::ALL.into_iter().find(|q| q.name() == name).ok_or_else(|| {
                    let valid: Vec<&str> = $ty::ALL.iter().map(|q| q.name()).collect();
                    TablesError::Invalid(format!(
                        concat!("unknown ", $what, " '{}'; valid modes: {}"),
                        name,
                        valid.join(", ")
                    ))
                })
            }
        }
    };
}

named_enum!(KvQuant, "KV-cache quant mode");
named_enum!(FmhaQuant, "FMHA quant mode");
named_enum!(MoeQuant, "MoE quant mode");
named_enum!(CommQuant, "communication quant mode");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for q in KvQuant::ALL {
            assert_eq!(q.name().parse::<KvQuant>().ok(), Some(q));
        }
        for q in FmhaQuant::ALL {
            assert_eq!(q.name().parse::<FmhaQuant>().ok(), Some(q));
        }
        for q in MoeQuant::ALL {
            assert_eq!(q.name().parse::<MoeQuant>().ok(), Some(q));
        }
        let err = "fp4".parse::<MoeQuant>().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("'fp4'") && err.contains("fp8_block"), "{err}");
    }
}
