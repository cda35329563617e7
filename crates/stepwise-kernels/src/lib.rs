//! CPU compute kernels shared by the encoders (`stepwise-features`) and the trainers (`stepwise-models`).
//!
//! - [`gemm`]: a packed matrix product `C = A·B (+ C)` over strided f32 views, with AVX-512 and AVX2 micro-kernels
//!   chosen at run time and a portable fallback. Every output element is summed in the same order whatever the
//!   thread count, so results are byte-identical for any `--threads`.
//! - [`bf16`]: bfloat16 screening products (AVX-512 BF16, twice the f32 rate) with per-row rounding bounds.
//! - [`attention`]: one head of scaled dot-product attention over a short sequence (BERT inference).
//! - [`peak`]: the measured f32 FMA peak of the machine, printed next to kernels' rates by the benchmarks.
//! - [`conv`]: depthwise convolution of a channel plane or of a channels-last map, with bias and clamp fused
//!   (EfficientNet-Lite).
//! - [`math`]: vectorised elementwise functions (`exp` for softmax rows), the same bits on every instruction set.

pub mod attention;
pub mod bf16;
pub mod conv;
pub mod gemm;
pub mod math;
pub mod peak;

pub use gemm::{
    BiasClamp, MatRef, PackedA, PackedB, gemm, gemm_batched, gemm_packed, gemm_packed_b_bias_clamp,
    gemm_packed_bias_clamp,
};
