//! CPU compute kernels shared by the encoders (`stepwise-features`) and the trainers (`stepwise-models`).
//!
//! - [`gemm`]: a packed matrix product `C = A·B (+ C)` over strided f32 views, with AVX-512 and AVX2 micro-kernels
//!   chosen at run time and a portable fallback. Every output element is summed in the same order whatever the
//!   thread count, so results are byte-identical for any `--threads`.
//! - [`math`]: vectorised elementwise functions (`exp` for softmax rows), the same bits on every instruction set.

pub mod gemm;
pub mod math;

pub use gemm::{MatRef, gemm, gemm_batched};
