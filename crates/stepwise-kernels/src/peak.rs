//! The machine's measured f32 fused-multiply-add peak, for benchmarks that print how far a kernel is from it.
//!
//! A loop of independent FMAs on twelve accumulators (enough to cover the FMA latency on two ports) with the
//! widest vectors the GEMM uses, run on every thread of rayon's pool at once: the number includes the frequency
//! the cores hold when all of them run vector code, which is what a parallel kernel gets.

use std::time::Instant;

use rayon::prelude::*;

use crate::gemm::Isa;

/// GFLOP/s (one FMA = 2 FLOP) of all rayon threads together, each running for about `seconds`.
pub fn fma_peak_gflops(seconds: f64) -> f64 {
    let threads = rayon::current_num_threads();
    (0..threads).into_par_iter().map(|_| one_thread(seconds, |r| run(Isa::detect(), r))).sum()
}

/// GFLOP/s (one bfloat16 pair product and add = 2 FLOP) of `vdpbf16ps` on all rayon threads together, the same
/// loop as [`fma_peak_gflops`]; `None` without AVX-512 BF16. Measured, not assumed: on the 2-core Xeon this
/// project is benchmarked on it is half the f32 FMA rate (one instruction per two cycles), not twice.
pub fn bf16_dot_peak_gflops(seconds: f64) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    if crate::bf16::available() {
        let threads = rayon::current_num_threads();
        // SAFETY: AVX-512F and AVX-512 BF16 were detected.
        let per = |r: u64| unsafe { x86::dot_bf16(r) } * r as f64;
        return Some((0..threads).into_par_iter().map(|_| one_thread(seconds, per)).sum());
    }
    let _ = seconds;
    None
}

/// Run `flops_of(rounds)` (returns the FLOPs done) with growing `rounds` until it lasts `seconds`; GFLOP/s.
fn one_thread(seconds: f64, flops_of: impl Fn(u64) -> f64) -> f64 {
    let mut rounds = 1u64 << 16;
    loop {
        let t = Instant::now();
        let flops = flops_of(rounds);
        let dt = t.elapsed().as_secs_f64();
        if dt >= seconds || rounds > 1 << 40 {
            return flops / dt / 1e9;
        }
        rounds = (rounds as f64 * (seconds / dt.max(1e-6)).clamp(1.5, 64.0)) as u64;
    }
}

/// FLOPs done by `rounds` rounds of 12 vector FMAs.
fn run(isa: Isa, rounds: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        match isa {
            // SAFETY: the ISA was detected on this CPU.
            Isa::Avx512 => return unsafe { x86::fma_avx512(rounds) } * rounds as f64,
            Isa::Avx2 => return unsafe { x86::fma_avx2(rounds) } * rounds as f64,
            Isa::Portable => {}
        }
    }
    let mut acc = [1f32; 12];
    for _ in 0..rounds {
        for a in acc.iter_mut() {
            *a = a.mul_add(0.999_999, 1e-7);
        }
    }
    std::hint::black_box(acc);
    let _ = isa;
    24.0 * rounds as f64
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Returns FLOPs per round (12 FMAs × 16 lanes × 2).
    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma_avx512(rounds: u64) -> f64 {
        let (b, c) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); 12];
        for _ in 0..rounds {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, b, c);
            }
        }
        std::hint::black_box(acc);
        12.0 * 16.0 * 2.0
    }

    /// Returns FLOPs per round (12 `vdpbf16ps` × 16 lanes × 2 pairs × 2).
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub unsafe fn dot_bf16(rounds: u64) -> f64 {
        let b: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi16(0x3f80)) };
        let c: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi16(0x3380)) };
        let mut acc = [_mm512_set1_ps(1.0); 12];
        for _ in 0..rounds {
            for a in acc.iter_mut() {
                *a = _mm512_dpbf16_ps(*a, b, c);
            }
        }
        std::hint::black_box(acc);
        12.0 * 16.0 * 4.0
    }

    /// Returns FLOPs per round (12 FMAs × 8 lanes × 2).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma_avx2(rounds: u64) -> f64 {
        let (b, c) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); 12];
        for _ in 0..rounds {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, b, c);
            }
        }
        std::hint::black_box(acc);
        12.0 * 8.0 * 2.0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_peak_is_a_positive_finite_rate() {
        let p = super::fma_peak_gflops(0.01);
        assert!(p.is_finite() && p > 0.1, "{p}");
        if let Some(b) = super::bf16_dot_peak_gflops(0.01) {
            assert!(b.is_finite() && b > 0.1, "{b}");
        }
    }
}
