//! GEMM quantisation modes (docs/spec section 3): bytes per element, compute
//! multiplier, and which `gemm_dtype` slice of a table serves the mode.

use std::fmt;
use std::str::FromStr;

use crate::error::TablesError;
use crate::pymath::py_repr;
use crate::system::Num;

/// A GEMM quant mode. Its numbers keep Python's types (`memory=1` is an int,
/// `0.5625` a float) because the SOL formula's rounding depends on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GemmQuant {
    Bfloat16,
    Fp8,
    Fp8Static,
    Fp8Block,
    Nvfp4,
    Int8Wo,
    Int4Wo,
    Sq,
    /// TRT-LLM's TensorRT-path fp8 name: a member of the spec's enum that no
    /// table collects, so every lookup keyed on it misses (docs/spec/options.md 1.1).
    Fp8Ootb,
}

impl GemmQuant {
    /// The modes a GEMM table can hold: what the GEMM functions take.
    pub const ALL: [GemmQuant; 8] = [
        GemmQuant::Bfloat16,
        GemmQuant::Fp8,
        GemmQuant::Fp8Static,
        GemmQuant::Fp8Block,
        GemmQuant::Nvfp4,
        GemmQuant::Int8Wo,
        GemmQuant::Int4Wo,
        GemmQuant::Sq,
    ];

    /// Every member of the spec's enum: [`Self::ALL`], then the table-less
    /// `fp8_ootb`; the names a quant override may give.
    pub const NAMED: [GemmQuant; 9] = {
        let mut named = [GemmQuant::Fp8Ootb; 9];
        let mut i = 0;
        while i < GemmQuant::ALL.len() {
            named[i] = GemmQuant::ALL[i];
            i += 1;
        }
        named
    };

    /// Whether any database can have a table of this mode (`fp8_ootb`
    /// cannot: the collectors never measure it).
    pub fn has_tables(self) -> bool {
        self != GemmQuant::Fp8Ootb
    }

    pub fn name(self) -> &'static str {
        match self {
            GemmQuant::Bfloat16 => "bfloat16",
            GemmQuant::Fp8 => "fp8",
            GemmQuant::Fp8Static => "fp8_static",
            GemmQuant::Fp8Block => "fp8_block",
            GemmQuant::Nvfp4 => "nvfp4",
            GemmQuant::Int8Wo => "int8_wo",
            GemmQuant::Int4Wo => "int4_wo",
            GemmQuant::Sq => "sq",
            GemmQuant::Fp8Ootb => "fp8_ootb",
        }
    }

    /// Bytes per element charged by the SOL memory term.
    pub fn memory(self) -> Num {
        match self {
            GemmQuant::Bfloat16 => Num::Int(2),
            GemmQuant::Nvfp4 => Num::Float(0.5625),
            GemmQuant::Int4Wo => Num::Float(0.5),
            _ => Num::Int(1),
        }
    }

    /// Tensor-core throughput multiplier relative to bfloat16.
    pub fn compute(self) -> i64 {
        match self {
            GemmQuant::Bfloat16 | GemmQuant::Int8Wo | GemmQuant::Int4Wo => 1,
            GemmQuant::Nvfp4 => 4,
            _ => 2,
        }
    }

    /// The `gemm_dtype` slice the spec looks the mode up in: `fp8_static`
    /// reads the dynamic-fp8 measurements (its scale overheads are separate
    /// tables), even where a file also carries `fp8_static` rows.
    pub fn slice_name(self) -> &'static str {
        match self {
            GemmQuant::Fp8Static => "fp8",
            other => other.name(),
        }
    }

    /// The Python object's repr, as the spec's miss messages print it:
    /// `<GEMMQuantMode.fp8: QuantMapping(memory=1, compute=2, name='fp8')>`.
    pub fn python_repr(self) -> String {
        format!(
            "<GEMMQuantMode.{name}: QuantMapping(memory={memory}, compute={compute}, name='{name}')>",
            name = self.name(),
            memory = py_repr(self.memory()),
            compute = self.compute(),
        )
    }

    /// The names of `modes`, comma-separated (for error messages).
    pub fn names(modes: &[GemmQuant]) -> String {
        modes.iter().map(|q| q.name()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for GemmQuant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GemmQuant {
    type Err = TablesError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        GemmQuant::NAMED.into_iter().find(|q| q.name() == name).ok_or_else(|| {
            TablesError::Invalid(format!(
                "unknown GEMM quant mode '{name}'; valid modes: {}",
                GemmQuant::names(&GemmQuant::NAMED)
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(GemmQuant::NAMED[..8], GemmQuant::ALL);
        assert!(!GemmQuant::NAMED[8].has_tables() && GemmQuant::ALL.iter().all(|q| q.has_tables()));
        for q in GemmQuant::NAMED {
            assert_eq!(q.name().parse::<GemmQuant>().ok(), Some(q));
        }
    }

    #[test]
    fn unknown_name_lists_valid_ones() {
        let err = "fp4".parse::<GemmQuant>().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("'fp4'") && err.contains("bfloat16, fp8, fp8_static"), "{err}");
    }

    #[test]
    fn repr_matches_the_spec_messages() {
        assert_eq!(GemmQuant::Fp8.python_repr(), "<GEMMQuantMode.fp8: QuantMapping(memory=1, compute=2, name='fp8')>");
        assert_eq!(
            GemmQuant::Nvfp4.python_repr(),
            "<GEMMQuantMode.nvfp4: QuantMapping(memory=0.5625, compute=4, name='nvfp4')>"
        );
        assert_eq!(
            GemmQuant::Int4Wo.python_repr(),
            "<GEMMQuantMode.int4_wo: QuantMapping(memory=0.5, compute=1, name='int4_wo')>"
        );
    }

    #[test]
    fn fp8_static_reads_the_fp8_slice() {
        assert_eq!(GemmQuant::Fp8Static.slice_name(), "fp8");
        assert_eq!(GemmQuant::Fp8Block.slice_name(), "fp8_block");
    }
}
