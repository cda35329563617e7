//! Packed f32 matrix product `C = A·B` or `C += A·B` over strided views (BLIS structure: B packed into panels of
//! `NR` columns per `KC` slice of the inner dimension, A into panels of `MR` rows, a register-blocked `MR × NR`
//! micro-kernel).
//!
//! Why our own: candle's CPU matmul (through the `gemm` crate) ran the trainers' products at well under half of
//! MKL's speed, and this kernel beats both (docs/performance.md). The training step of `stepwise bench seq-train`
//! spends most of its time here.
//!
//! Determinism: every output element is `fma(a_p, b_p, acc)` over `p` in increasing order within each `KC` slice,
//! slices added to `C` in order; a product with a long inner dimension and a small output splits it into parts of
//! whole slices, chosen from the shape alone, whose results are added to `C` in part order. Tiling over `M` and
//! `N` and the thread count change only who computes an element, never how, so results are byte-identical for any
//! number of threads; the AVX-512, AVX2 and portable kernels all use fused multiply-add in the same order and
//! agree bit for bit.

use std::cell::RefCell;

use rayon::prelude::*;

/// Slice of the inner dimension packed at once (A panel `MR × KC` and B panel `KC × NR` stay in L1/L2).
const KC: usize = 256;
/// Rows of A per task (a multiple of every kernel's `MR`).
const MC: usize = 96;
/// Columns of B packed at once.
const NC: usize = 2048;
/// Columns per pass over a packed A block: the `KC × NT` slice of packed B (256 KiB) stays in L2 while the A
/// panels stream through it.
const NT: usize = 256;

/// A read-only strided matrix view: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> MatRef<'a> {
    /// A contiguous row-major `rows × cols` matrix.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> MatRef<'a> {
        MatRef { data, rows, cols, rs: cols, cs: 1 }
    }

    /// The transpose (no copy).
    pub fn t(self) -> MatRef<'a> {
        MatRef { data: self.data, rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs }
    }

    /// Whether every element lies inside `data`.
    fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last =
            (self.rows - 1).checked_mul(self.rs).and_then(|r| (self.cols - 1).checked_mul(self.cs)?.checked_add(r));
        matches!(last, Some(l) if l < self.data.len())
    }

    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }
}

/// A shape or bounds mismatch (a caller's bug, reported instead of a panic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GemmError(pub String);

impl std::fmt::Display for GemmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gemm: {}", self.0)
    }
}

impl std::error::Error for GemmError {}

/// The micro-kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// 12 × 32 tile, 24 zmm accumulators.
    Avx512,
    /// 6 × 16 tile, 12 ymm accumulators.
    Avx2,
    /// 4 × 16 tile in plain Rust with `mul_add` (other architectures).
    Portable,
}

impl Isa {
    /// The best kernel this CPU runs.
    pub fn detect() -> Isa {
        static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *ISA.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512f") {
                    return Isa::Avx512;
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    return Isa::Avx2;
                }
            }
            Isa::Portable
        })
    }

    /// Whether this CPU can run the kernel.
    pub fn available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    fn tile(self) -> (usize, usize) {
        match self {
            Isa::Avx512 => (12, 32),
            Isa::Avx2 => (6, 16),
            Isa::Portable => (4, 16),
        }
    }

    /// Run the `MR × NR` kernel: `C[0..MR, 0..NR] (+)= A · Bp` over `kc` steps, `A` a panel of `MR` rows (packed,
    /// or read in place by the AVX-512 kernels).
    ///
    /// # Safety
    /// `a` reaches `MR` rows of `kc` values, `bp` holds `kc * NR` values; `c` is valid for `MR` rows of `NR` values
    /// `ldc` apart.
    #[inline(always)]
    unsafe fn kernel(self, kc: usize, a: APanel, bp: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        // SAFETY: forwarded contract; the ISA was checked available before any call.
        unsafe {
            match (self, a) {
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx512, APanel::Packed(ap)) => x86::kernel_avx512(kc, ap, bp, c, ldc, accumulate),
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx512, APanel::Rows { ptr, rs }) => x86::kernel_avx512_rows(kc, ptr, rs, bp, c, ldc, accumulate),
                #[cfg(target_arch = "x86_64")]
                (Isa::Avx2, APanel::Packed(ap)) => x86::kernel_avx2(kc, ap, bp, c, ldc, accumulate),
                (_, APanel::Packed(ap)) => kernel_portable(kc, ap, bp, c, ldc, accumulate),
                (_, APanel::Rows { .. }) => unreachable!("only the AVX-512 kernel reads A in place (reads_a_in_place)"),
            }
        }
    }
}

/// A panel of `MR` rows of A as the kernel reads it.
#[derive(Clone, Copy)]
enum APanel {
    /// Packed: value `(i, p)` at `ptr[p * MR + i]`.
    Packed(*const f32),
    /// Twelve rows of a row-major matrix read in place (AVX-512 only): value `(i, p)` at `ptr[i * rs + p]`.
    Rows { ptr: *const f32, rs: usize },
}

/// `C = A·B` (or `C += A·B` when `accumulate`), `C` row-major `A.rows × B.cols`, using the best kernel and, when
/// `parallel`, rayon's pool.
pub fn gemm(a: MatRef, b: MatRef, c: &mut [f32], accumulate: bool, parallel: bool) -> Result<(), GemmError> {
    gemm_with(Isa::detect(), a, b, c, accumulate, parallel)
}

/// [`gemm`] with a chosen kernel (tests compare the kernels).
pub fn gemm_with(
    isa: Isa,
    a: MatRef,
    b: MatRef,
    c: &mut [f32],
    accumulate: bool,
    parallel: bool,
) -> Result<(), GemmError> {
    check(isa, &a, &b, c.len())?;
    gemm_inner(isa, Left::View(a), Right::View(b), c, accumulate, parallel, None);
    Ok(())
}

/// A left operand packed once into the kernel's panels, for products with the same `A` and many `B`s (an
/// encoder's weights): packing a 1152 × 192 weight for a 7 × 7 feature map cost as much as the product.
#[derive(Debug, Clone)]
pub struct PackedA {
    isa: Isa,
    rows: usize,
    cols: usize,
    data: Vec<f32>,
    /// Start of the panels of (inner slice `pc / KC`, row block `i0 / MC`) in `data`.
    starts: Vec<usize>,
}

impl PackedA {
    /// Pack `a` for the best kernel of this CPU.
    pub fn new(a: MatRef) -> Result<PackedA, GemmError> {
        let isa = Isa::detect();
        if !a.in_bounds() {
            return Err(GemmError("a strided view reaches past its data".into()));
        }
        let (m, k) = (a.rows, a.cols);
        let (data, starts) =
            pack_once(k, m, MC, isa.tile().0, |pc, kc, i0, mc, buf| pack_a(isa, &a, i0, mc, pc, kc, buf));
        Ok(PackedA { isa, rows: m, cols: k, data, starts })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    fn block(&self, pc: usize, i0: usize) -> &[f32] {
        &self.data[self.starts[pc / KC * self.rows.div_ceil(MC) + i0 / MC]..]
    }
}

/// A right operand packed once into the kernel's column panels, for products with the same `B` and many `A`s: a
/// 1x1 convolution over channels-last feature maps is `X · Wᵀ`, the weight on the right.
#[derive(Debug, Clone)]
pub struct PackedB {
    isa: Isa,
    rows: usize,
    cols: usize,
    data: Vec<f32>,
    /// Start of the panels of (inner slice `pc / KC`, column block `jc / NC`) in `data`.
    starts: Vec<usize>,
}

impl PackedB {
    /// Pack `b` for the best kernel of this CPU.
    pub fn new(b: MatRef) -> Result<PackedB, GemmError> {
        let isa = Isa::detect();
        if !b.in_bounds() {
            return Err(GemmError("a strided view reaches past its data".into()));
        }
        let (k, n) = (b.rows, b.cols);
        let (data, starts) =
            pack_once(k, n, NC, isa.tile().1, |pc, kc, jc, nc, buf| pack_b(isa, &b, pc, kc, jc, nc, false, buf));
        Ok(PackedB { isa, rows: k, cols: n, data, starts })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    fn block(&self, pc: usize, jc: usize) -> &[f32] {
        &self.data[self.starts[pc / KC * self.cols.div_ceil(NC) + jc / NC]..]
    }
}

/// The panels of an operand packed once for many products ([`PackedA`], [`PackedB`]): for each inner slice of
/// `KC` values (of `k`) and each block of `step` rows or columns (of `len`), `pack(pc, kc, x0, xc, buf)` fills
/// `buf`, whose panels of `panel` rows or columns are kept. Returns the values and where each (slice, block)
/// starts, slice by slice.
fn pack_once(
    k: usize,
    len: usize,
    step: usize,
    panel: usize,
    mut pack: impl FnMut(usize, usize, usize, usize, &mut Vec<f32>),
) -> (Vec<f32>, Vec<usize>) {
    let (mut data, mut starts, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    for pc in (0..k).step_by(KC) {
        let kc = KC.min(k - pc);
        for x0 in (0..len).step_by(step) {
            let xc = step.min(len - x0);
            pack(pc, kc, x0, xc, &mut buf);
            starts.push(data.len());
            data.extend_from_slice(&buf[..xc.div_ceil(panel) * kc * panel]);
        }
    }
    (data, starts)
}

/// [`gemm`] with a pre-packed left operand: the same values as `gemm` with the matrix it was packed from.
pub fn gemm_packed(a: &PackedA, b: MatRef, c: &mut [f32], accumulate: bool, parallel: bool) -> Result<(), GemmError> {
    check_packed(a.isa, (a.rows, a.cols), (b.rows, b.cols), &b, c.len())?;
    gemm_inner(a.isa, Left::Packed(a), Right::View(b), c, accumulate, parallel, None);
    Ok(())
}

/// A bias and a clamp applied to each value of a product once it is complete: `C = clamp(A·B + bias[row], lo, hi)`
/// with [`gemm_packed_bias_clamp`], `bias[column]` with [`gemm_packed_b_bias_clamp`] (a convolution's folded batch
/// norm and ReLU6 are `lo = 0, hi = 6`; no activation is `±∞`).
#[derive(Clone, Copy, Debug)]
pub struct BiasClamp<'a> {
    pub bias: &'a [f32],
    pub lo: f32,
    pub hi: f32,
}

impl BiasClamp<'_> {
    /// An error unless the bias covers `needed` rows or columns (`along`) and the bounds are ordered (NaN bounds
    /// are refused too: `f32::clamp` needs `lo <= hi`).
    fn check(&self, needed: usize, along: &str) -> Result<(), GemmError> {
        let ordered =
            matches!(self.lo.partial_cmp(&self.hi), Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal));
        if self.bias.len() < needed || !ordered {
            return Err(GemmError(format!(
                "a bias of {} values for {needed} {along}, clamp [{}, {}]",
                self.bias.len(),
                self.lo,
                self.hi
            )));
        }
        Ok(())
    }
}

/// A [`BiasClamp`] and what its bias runs along.
#[derive(Clone, Copy, Debug)]
struct Epilogue<'a> {
    clamp: BiasClamp<'a>,
    /// One bias per column (channels-last products) instead of one per row.
    per_column: bool,
}

impl Epilogue<'_> {
    /// Apply to row `row` of the output, columns `col..col + values.len()`.
    fn apply(&self, row: usize, col: usize, values: &mut [f32]) {
        let BiasClamp { bias, lo, hi } = self.clamp;
        if self.per_column {
            crate::math::add_each_clamp(values, &bias[col..col + values.len()], lo, hi);
        } else {
            crate::math::add_clamp(values, bias[row], lo, hi);
        }
    }

    /// Apply to every row of a whole row-major output `n` columns wide.
    fn apply_rows(&self, c: &mut [f32], n: usize) {
        c.chunks_mut(n).enumerate().for_each(|(i, row)| self.apply(i, 0, row));
    }
}

/// `C = clamp(A·B + bias, lo, hi)` with a pre-packed `A` (see [`BiasClamp`]): the bias and clamp are applied to each
/// block of `C` right after its last product slice, while it is in cache, instead of in passes over the whole
/// output (separate bias and ReLU6 passes over every feature map were a tenth of EfficientNet-Lite0's time).
pub fn gemm_packed_bias_clamp(
    a: &PackedA,
    b: MatRef,
    c: &mut [f32],
    epilogue: BiasClamp,
    parallel: bool,
) -> Result<(), GemmError> {
    check_packed(a.isa, (a.rows, a.cols), (b.rows, b.cols), &b, c.len())?;
    epilogue.check(a.rows, "rows")?;
    let epilogue = Epilogue { clamp: epilogue, per_column: false };
    gemm_inner(a.isa, Left::Packed(a), Right::View(b), c, false, parallel, Some(epilogue));
    Ok(())
}

/// `C = clamp(A·B + bias[column], lo, hi)` with a pre-packed `B`: [`gemm_packed_bias_clamp`] for a bias along the
/// columns (a 1x1 convolution of channels-last maps, `X · Wᵀ + b`). `A` is read as [`gemm`] reads it. The same
/// values, bit for bit, as the transposed product `Bᵀ·Aᵀ` through [`gemm_packed_bias_clamp`] with the bias along
/// its rows: each output is the same chain of fused multiply-adds.
pub fn gemm_packed_b_bias_clamp(
    a: MatRef,
    b: &PackedB,
    c: &mut [f32],
    epilogue: BiasClamp,
    parallel: bool,
) -> Result<(), GemmError> {
    check_packed(b.isa, (a.rows, a.cols), (b.rows, b.cols), &a, c.len())?;
    epilogue.check(b.cols, "columns")?;
    let epilogue = Epilogue { clamp: epilogue, per_column: true };
    gemm_inner(b.isa, Left::View(a), Right::Packed(b), c, false, parallel, Some(epilogue));
    Ok(())
}

/// The checks of a product with a pre-packed operand (packed for `isa`): A is `m × k`, B `kb × n`, `view` the
/// operand given as a view.
fn check_packed(
    isa: Isa,
    (m, k): (usize, usize),
    (kb, n): (usize, usize),
    view: &MatRef,
    c_len: usize,
) -> Result<(), GemmError> {
    if isa != Isa::detect() {
        return Err(GemmError(format!("packed for the {:?} kernel, this CPU runs {:?}", isa, Isa::detect())));
    }
    if k != kb {
        return Err(GemmError(format!("A is {m}×{k}, B is {kb}×{n}")));
    }
    if c_len != m * n {
        return Err(GemmError(format!("output holds {c_len} values, {m}×{n} needs {}", m * n)));
    }
    if !view.in_bounds() {
        return Err(GemmError("a strided view reaches past its data".into()));
    }
    Ok(())
}

/// The left operand of a product: a view packed per task, or packed in advance.
#[derive(Clone, Copy)]
enum Left<'a> {
    View(MatRef<'a>),
    Packed(&'a PackedA),
}

/// The right operand of a product: a view packed per call, or packed in advance.
#[derive(Clone, Copy)]
enum Right<'a> {
    View(MatRef<'a>),
    Packed(&'a PackedB),
}

impl Right<'_> {
    fn cols(&self) -> usize {
        match self {
            Right::View(v) => v.cols,
            Right::Packed(p) => p.cols,
        }
    }
}

/// The product over checked operands.
fn gemm_inner(
    isa: Isa,
    a: Left,
    b: Right,
    c: &mut [f32],
    accumulate: bool,
    parallel: bool,
    epilogue: Option<Epilogue>,
) {
    let (m, k) = match a {
        Left::View(v) => (v.rows, v.cols),
        Left::Packed(p) => (p.rows, p.cols),
    };
    let n = b.cols();
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        if let Some(e) = epilogue {
            e.apply_rows(c, n);
        }
        return;
    }
    let slices = k.div_ceil(KC);
    let parts = split_parts(m, n, slices);
    if parts == 1 {
        gemm_slices(isa, a, b, c, accumulate, parallel, 0..slices, epilogue);
        return;
    }
    // Part 0 goes straight into C (added to it when accumulating), the others into their own outputs, added to C
    // in part order. Parts run on their own threads; a part splits further only when threads outnumber parts (the
    // values do not depend on it).
    let range = |i: usize| i * slices / parts..(i + 1) * slices / parts;
    let inner_parallel = parallel && parts < rayon::current_num_threads();
    let part = |i: usize| {
        let mut out = vec![0f32; m * n];
        gemm_slices(isa, a, b, &mut out, false, inner_parallel, range(i), None);
        out
    };
    let partials: Vec<Vec<f32>> = if parallel {
        rayon::join(
            || gemm_slices(isa, a, b, c, accumulate, inner_parallel, range(0), None),
            || (1..parts).into_par_iter().map(part).collect(),
        )
        .1
    } else {
        gemm_slices(isa, a, b, c, accumulate, false, range(0), None);
        (1..parts).map(part).collect()
    };
    let add = |(i, chunk): (usize, &mut [f32])| {
        for p in &partials {
            chunk.iter_mut().zip(&p[i * SUM_CHUNK..]).for_each(|(c, v)| *c += v);
        }
    };
    if parallel {
        c.par_chunks_mut(SUM_CHUNK).enumerate().for_each(add);
    } else {
        c.chunks_mut(SUM_CHUNK).enumerate().for_each(add);
    }
    if let Some(e) = epilogue {
        e.apply_rows(c, n);
    }
}

/// Outputs per task of the sum of a split product's parts.
const SUM_CHUNK: usize = 16 * 1024;

/// Into how many parts a product splits its inner dimension (`slices` slices of `KC`), from its shape alone.
///
/// Why: the weight gradients `Xᵀ·dY` of a training step (inner dimension the thousands of rows of a batch, small
/// outputs) ran well below the forward products' speed when split over the outputs only: each of their inner
/// slices was a parallel pass of a few uneven tasks with a join at its end. Split over the inner dimension, each
/// thread runs whole parts on its own.
///
/// Two parts, whatever the inner length: with more parts than cores (the earlier rule, `(slices / 4).min(8)`,
/// gave three for 13 slices) one core idled while the last part ran, and each further part costs a partial output
/// and its sum; two parts give each core of the two-core machine one part (more threads split each part over its
/// outputs). Only for inner dimensions of at least 8 slices and outputs small enough that the partial output (at
/// most 4 MB) costs little next to the product.
fn split_parts(m: usize, n: usize, slices: usize) -> usize {
    if m * n > SPLIT_MAX_OUTPUTS || slices < 8 { 1 } else { 2 }
}

/// The longest inner dimension a product always sums in one part, whatever its output's shape: an output's value
/// then depends only on its row of A and column of B, not on how many rows or columns are computed with it
/// (EfficientNet's convolutions rely on this to give the same bits for any group of images).
pub const UNSPLIT_INNER: usize = 7 * KC;

/// The largest output (`m·n`) a product splits its inner dimension for.
const SPLIT_MAX_OUTPUTS: usize = 1 << 20;

/// Whether the kernel reads A's full row panels in place instead of packing them: on AVX-512, for a row-major A
/// (unit column stride), when B is at most [`IN_PLACE_MAX_COLS`] wide.
///
/// Why: packing costs one copy of A, which a product with few columns does not amortise. Attention's `P·V` and
/// `dS·K` (550 × 550 by 550 × 64 per head) spent a copy of A for every 128 multiply-adds and run faster read in
/// place. A column-major A (`Pᵀ·dO`, `dSᵀ·Q`) read in place was slower than packed, and so were the dense
/// products with 256 columns (docs/performance.md).
fn reads_a_in_place(isa: Isa, a: &MatRef, n: usize) -> bool {
    isa == Isa::Avx512 && n <= IN_PLACE_MAX_COLS && a.cs == 1
}

/// The widest B whose products read A in place.
const IN_PLACE_MAX_COLS: usize = 128;

/// `C (+)= A·B` over the inner slices `slices` (of `KC` values; non-empty operands).
#[allow(clippy::too_many_arguments)]
fn gemm_slices(
    isa: Isa,
    a: Left,
    b: Right,
    c: &mut [f32],
    accumulate: bool,
    parallel: bool,
    slices: std::ops::Range<usize>,
    epilogue: Option<Epilogue>,
) {
    let (m, k) = match a {
        Left::View(v) => (v.rows, v.cols),
        Left::Packed(p) => (p.rows, p.cols),
    };
    let n = b.cols();
    let out = OutPtr(c.as_mut_ptr());
    let (_, nr) = isa.tile();
    // The packed-B buffer is taken from this thread's cache and put back (a nested call finds it empty and
    // allocates its own): attention makes thousands of small products, each allocating cost page faults.
    let mut bpack = BPACK.with(|b| b.take());
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in slices.clone().map(|s| s * KC) {
            let kc = KC.min(k - pc);
            let add = accumulate || pc > slices.start * KC;
            let epilogue = epilogue.filter(|_| pc / KC + 1 == slices.end);
            let bp = match b {
                Right::View(b) => {
                    pack_b(isa, &b, pc, kc, jc, nc, parallel, &mut bpack);
                    &bpack[..]
                }
                Right::Packed(p) => p.block(pc, jc),
            };
            let row_blocks = m.div_ceil(MC);
            // Tasks are (row block × column group); a task packs its A block once and sweeps its group in slices
            // of at most NT columns, whose packed B stays in L2. Thin products (few row blocks) split into more
            // groups so every thread has work.
            let groups = if parallel { (2 * rayon::current_num_threads()).div_ceil(row_blocks) } else { 1 };
            let group = nc.div_ceil(groups.clamp(1, nc.div_ceil(nr))).div_ceil(nr) * nr;
            let col_blocks = nc.div_ceil(group);
            let task = |t: usize| {
                let (ib, jb) = (t / col_blocks, t % col_blocks);
                let (i0, mc) = (ib * MC, MC.min(m - ib * MC));
                let (g0, g1) = (jb * group, nc.min((jb + 1) * group));
                let sweep = |a: ABlock| {
                    for j0 in (g0..g1).step_by(NT) {
                        let nt = NT.min(g1 - j0);
                        // SAFETY: tasks write disjoint tiles (rows i0..i0+mc, columns jc+g0..jc+g1) of `c`, which
                        // outlives the loop; the packed buffers have the sizes the kernel reads, an in-place A
                        // was checked in bounds.
                        unsafe { block(isa, kc, a, &bp[j0 * kc..], mc, nt, out, n, i0, jc + j0, add) };
                        if let Some(e) = epilogue {
                            for i in i0..i0 + mc {
                                // SAFETY: this task's tile, as above.
                                let row = unsafe { std::slice::from_raw_parts_mut(out.0.add(i * n + jc + j0), nt) };
                                e.apply(i, jc + j0, row);
                            }
                        }
                    }
                };
                match a {
                    Left::View(a) if reads_a_in_place(isa, &a, n) => APACK.with(|buf| {
                        // Only a last panel shorter than MR rows is packed (reading past the matrix otherwise).
                        let mut tail = buf.borrow_mut();
                        let (mr, _) = isa.tile();
                        let full = mc / mr;
                        if full * mr < mc {
                            pack_a(isa, &a, i0 + full * mr, mc - full * mr, pc, kc, &mut tail);
                        }
                        let ptr = a.data[i0 * a.rs + pc..].as_ptr();
                        sweep(ABlock::InPlace { ptr, rs: a.rs, tail: &tail });
                    }),
                    Left::View(a) => APACK.with(|buf| {
                        let mut ap = buf.borrow_mut();
                        pack_a(isa, &a, i0, mc, pc, kc, &mut ap);
                        sweep(ABlock::Packed(&ap));
                    }),
                    Left::Packed(p) => sweep(ABlock::Packed(p.block(pc, i0))),
                }
            };
            let tasks = row_blocks * col_blocks;
            if parallel && tasks > 1 {
                (0..tasks).into_par_iter().for_each(task);
            } else {
                (0..tasks).for_each(task);
            }
        }
    }
    BPACK.with(|b| {
        if b.borrow().capacity() < bpack.capacity() {
            b.replace(bpack);
        }
    });
}

/// `batch` independent products `C_i = A_i·B_i` (`A_i` at `a.data[i * a_batch..]`, likewise B and C, C row-major
/// and `c_batch` apart), spread over rayon's pool by batch when there are enough of them.
pub fn gemm_batched(
    batch: usize,
    a: MatRef,
    a_batch: usize,
    b: MatRef,
    b_batch: usize,
    c: &mut [f32],
    accumulate: bool,
) -> Result<(), GemmError> {
    let (m, n) = (a.rows, b.cols);
    let c_batch = m * n;
    if batch == 0 || c_batch == 0 {
        return Ok(());
    }
    if c.len() != batch * c_batch {
        return Err(GemmError(format!(
            "output holds {} values, {batch} products of {m}×{n} need {}",
            c.len(),
            batch * c_batch
        )));
    }
    fn view<'v>(x: &MatRef<'v>, stride: usize, i: usize) -> Result<MatRef<'v>, GemmError> {
        let start = i * stride;
        let data = x.data.get(start..).ok_or_else(|| GemmError(format!("batch {i} starts past the input")))?;
        Ok(MatRef { data, ..*x })
    }
    let isa = Isa::detect();
    if batch >= 2 * rayon::current_num_threads() {
        c.par_chunks_mut(c_batch)
            .enumerate()
            .try_for_each(|(i, ci)| gemm_with(isa, view(&a, a_batch, i)?, view(&b, b_batch, i)?, ci, accumulate, false))
    } else {
        c.chunks_mut(c_batch)
            .enumerate()
            .try_for_each(|(i, ci)| gemm_with(isa, view(&a, a_batch, i)?, view(&b, b_batch, i)?, ci, accumulate, true))
    }
}

fn check(isa: Isa, a: &MatRef, b: &MatRef, c_len: usize) -> Result<(), GemmError> {
    if !isa.available() {
        return Err(GemmError(format!("{isa:?} kernel not available on this CPU")));
    }
    if a.cols != b.rows {
        return Err(GemmError(format!("A is {}×{}, B is {}×{}", a.rows, a.cols, b.rows, b.cols)));
    }
    if c_len != a.rows * b.cols {
        return Err(GemmError(format!("output holds {c_len} values, {}×{} needs {}", a.rows, b.cols, a.rows * b.cols)));
    }
    if !a.in_bounds() || !b.in_bounds() {
        return Err(GemmError("a strided view reaches past its data".into()));
    }
    Ok(())
}

thread_local! {
    /// Packed A block of the current task, reused across calls (no allocation per product).
    static APACK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// Packed B of the product this thread runs, kept for the next one.
    static BPACK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint parts of the output (see `gemm_with`).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// Pack rows `i0..i0+mc`, inner indices `p0..p0+kc` of A as panels of `MR` rows: `[panel][p][row]`, padding rows
/// zero. The buffer only grows: a full panel overwrites every value it holds, so nothing is cleared first.
fn pack_a(isa: Isa, a: &MatRef, i0: usize, mc: usize, p0: usize, kc: usize, out: &mut Vec<f32>) {
    let (mr, _) = isa.tile();
    let len = mc.div_ceil(mr) * kc * mr;
    if out.len() < len {
        out.resize(len, 0.0);
    }
    for (panel, dst) in out[..len].chunks_exact_mut(kc * mr).enumerate() {
        let r0 = i0 + panel * mr;
        let rows = mr.min(i0 + mc - r0);
        if rows < mr {
            dst.fill(0.0);
        }
        if a.cs == 1 {
            // Row-major A: each panel is a transpose of `rows × kc` values.
            #[allow(unused_mut)]
            let mut done = 0;
            #[cfg(target_arch = "x86_64")]
            if isa == Isa::Avx512 && rows == 12 {
                let src: [*const f32; 12] = std::array::from_fn(|i| a.data[(r0 + i) * a.rs + p0..][..kc].as_ptr());
                // SAFETY: AVX-512 checked available before any call; each source row holds `kc` values (sliced
                // above) and `dst` holds `kc * 12`.
                done = unsafe { x86::pack_transposed_avx512(&src, mr, kc, dst.as_mut_ptr()) };
            }
            for i in 0..rows {
                let row = &a.data[(r0 + i) * a.rs + p0..][..kc];
                for (p, &v) in row.iter().enumerate().skip(done) {
                    dst[p * mr + i] = v;
                }
            }
        } else if a.rs == 1 {
            // A transposed view: the rows of a panel are adjacent for each inner index.
            copy_rows(dst, mr, &a.data[r0 + p0 * a.cs..], a.cs, kc, rows);
        } else {
            for p in 0..kc {
                for i in 0..rows {
                    dst[p * mr + i] = a.at(r0 + i, p0 + p);
                }
            }
        }
    }
}

/// `dst[p * ld..][..n] = src[p * stride..][..n]` for `p < kc`: a panel's rows copied from strided rows.
/// Monomorphised per tile width so each row is a few inline vector moves: a `match` on the width inside the loop
/// was merged by LLVM back into one `memcpy` call per 48–128 byte row.
fn copy_rows(dst: &mut [f32], ld: usize, src: &[f32], stride: usize, kc: usize, n: usize) {
    #[inline(always)]
    fn fixed<const N: usize>(dst: &mut [f32], ld: usize, src: &[f32], stride: usize, kc: usize) {
        for p in 0..kc {
            let row: &[f32; N] = src[p * stride..][..N].try_into().expect("a slice of N values");
            let out: &mut [f32; N] = (&mut dst[p * ld..][..N]).try_into().expect("a slice of N values");
            *out = *row;
        }
    }
    match n {
        32 => fixed::<32>(dst, ld, src, stride, kc),
        16 => fixed::<16>(dst, ld, src, stride, kc),
        12 => fixed::<12>(dst, ld, src, stride, kc),
        6 => fixed::<6>(dst, ld, src, stride, kc),
        4 => fixed::<4>(dst, ld, src, stride, kc),
        _ => (0..kc).for_each(|p| dst[p * ld..][..n].copy_from_slice(&src[p * stride..][..n])),
    }
}

/// Pack inner indices `p0..p0+kc`, columns `j0..j0+nc` of B as panels of `nr` columns: `[panel][p][col]`,
/// padding columns zero; the buffer only grows, as in [`pack_a`].
#[allow(clippy::too_many_arguments)]
fn pack_b(isa: Isa, b: &MatRef, p0: usize, kc: usize, j0: usize, nc: usize, parallel: bool, out: &mut Vec<f32>) {
    let (_, nr) = isa.tile();
    let len = nc.div_ceil(nr) * kc * nr;
    if out.len() < len {
        out.resize(len, 0.0);
    }
    let pack = |(panel, dst): (usize, &mut [f32])| {
        let c0 = j0 + panel * nr;
        let cols = nr.min(j0 + nc - c0);
        if cols < nr {
            dst.fill(0.0);
        }
        if b.cs == 1 {
            copy_rows(dst, nr, &b.data[p0 * b.rs + c0..], b.rs, kc, cols);
        } else {
            #[allow(unused_mut)]
            let mut done = 0;
            #[cfg(target_arch = "x86_64")]
            if isa == Isa::Avx512 && b.rs == 1 {
                // B transposed (columns contiguous), as in `x · Wᵀ` and `Q · Kᵀ`.
                let src: [*const f32; 32] = std::array::from_fn(|j| {
                    if j < cols { b.data[(c0 + j) * b.cs + p0..][..kc].as_ptr() } else { std::ptr::null() }
                });
                // SAFETY: AVX-512 checked available before any call; each of the `cols` columns holds `kc` values
                // (sliced above), `dst` holds `kc * 32`.
                done = unsafe { x86::pack_transposed_avx512(&src[..cols], nr, kc, dst.as_mut_ptr()) };
            }
            for j in 0..cols {
                for p in done..kc {
                    dst[p * nr + j] = b.at(p0 + p, c0 + j);
                }
            }
        }
    };
    if parallel {
        out[..len].par_chunks_exact_mut(kc * nr).enumerate().for_each(pack);
    } else {
        out[..len].chunks_exact_mut(kc * nr).enumerate().for_each(pack);
    }
}

/// Where the kernel finds the row panels of an `mc × kc` block of A.
#[derive(Clone, Copy)]
enum ABlock<'a> {
    /// Packed panels, one after another.
    Packed(&'a [f32]),
    /// Full panels of a row-major A read in place (see [`APanel::Rows`]: the block's first value at `ptr`); the
    /// last panel, when shorter than `MR` rows, packed in `tail`.
    InPlace { ptr: *const f32, rs: usize, tail: &'a [f32] },
}

impl ABlock<'_> {
    /// Panel `ip` (rows `ip·MR ..`) of a block whose inner slice has `kc` values.
    fn panel(&self, ip: usize, mr: usize, kc: usize, full: usize) -> APanel {
        match *self {
            ABlock::Packed(ap) => APanel::Packed(ap[ip * kc * mr..][..kc * mr].as_ptr()),
            // Full panels lie inside the matrix the caller checked in bounds.
            ABlock::InPlace { ptr, rs, .. } if ip < full => APanel::Rows { ptr: ptr.wrapping_add(ip * mr * rs), rs },
            ABlock::InPlace { tail, .. } => APanel::Packed(tail[..kc * mr].as_ptr()),
        }
    }
}

/// Multiply an `mc × kc` block of A by `nt` packed columns of B into `C[i0.., j0..]`.
///
/// # Safety
/// `c` points at a row-major matrix with `ldc` columns that contains rows `i0..i0+mc`, columns `j0..j0+nt`, and no
/// other thread touches that tile; an in-place `a` reaches the block's full panels.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    isa: Isa,
    kc: usize,
    a: ABlock,
    bp: &[f32],
    mc: usize,
    nt: usize,
    c: OutPtr,
    ldc: usize,
    i0: usize,
    j0: usize,
    accumulate: bool,
) {
    let (mr, nr) = isa.tile();
    let full = mc / mr;
    let mut edge = [0f32; 12 * 32];
    for jp in 0..nt.div_ceil(nr) {
        let cols = nr.min(nt - jp * nr);
        let bpanel = &bp[jp * kc * nr..][..kc * nr];
        for ip in 0..mc.div_ceil(mr) {
            let rows = mr.min(mc - ip * mr);
            let apanel = a.panel(ip, mr, kc, full);
            // SAFETY: the caller owns this tile; full tiles are written in place, partial ones through `edge`.
            unsafe {
                let dst = c.0.add((i0 + ip * mr) * ldc + j0 + jp * nr);
                if rows == mr && cols == nr {
                    isa.kernel(kc, apanel, bpanel.as_ptr(), dst, ldc, accumulate);
                } else {
                    isa.kernel(kc, apanel, bpanel.as_ptr(), edge.as_mut_ptr(), nr, false);
                    for i in 0..rows {
                        for j in 0..cols {
                            let v = edge[i * nr + j];
                            let d = dst.add(i * ldc + j);
                            *d = if accumulate { *d + v } else { v };
                        }
                    }
                }
            }
        }
    }
}

/// Portable 4 × 16 kernel (`mul_add` keeps the rounding of the SIMD kernels).
///
/// # Safety
/// See [`Isa::kernel`].
unsafe fn kernel_portable(kc: usize, ap: *const f32, bp: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
    const MR: usize = 4;
    const NR: usize = 16;
    let mut acc = [[0f32; NR]; MR];
    // SAFETY: sizes per the contract.
    unsafe {
        let a = std::slice::from_raw_parts(ap, kc * MR);
        let b = std::slice::from_raw_parts(bp, kc * NR);
        for p in 0..kc {
            let bv = &b[p * NR..p * NR + NR];
            for (i, row) in acc.iter_mut().enumerate() {
                let av = a[p * MR + i];
                for (x, &bj) in row.iter_mut().zip(bv) {
                    *x = av.mul_add(bj, *x);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            let dst = std::slice::from_raw_parts_mut(c.add(i * ldc), NR);
            for (d, &v) in dst.iter_mut().zip(row) {
                *d = if accumulate { *d + v } else { v };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    // The accumulators are named locals, not an array: with an array LLVM spilled half of them to the stack.

    /// One row of the tile: `c0 += a·b0`, `c1 += a·b1` with `a` broadcast from `ap[$i]`.
    macro_rules! row {
        ($set1:ident, $fma:ident, $a:expr, $i:expr, $b0:expr, $b1:expr, $c0:ident, $c1:ident) => {
            let av = $set1(*$a.add($i));
            $c0 = $fma(av, $b0, $c0);
            $c1 = $fma(av, $b1, $c1);
        };
    }

    /// Store (or add) one row of the tile at `d`.
    macro_rules! store {
        ($load:ident, $store:ident, $add:ident, $w:expr, $d:expr, $acc:expr, $c0:ident, $c1:ident) => {
            let d = $d;
            if $acc {
                $store(d, $add($load(d), $c0));
                $store(d.add($w), $add($load(d.add($w)), $c1));
            } else {
                $store(d, $c0);
                $store(d.add($w), $c1);
            }
        };
    }

    /// Store (or add) the 12 × 32 tile of [`kernel_avx512`] at `c`, rows `ldc` apart: accumulators in row order,
    /// two per row.
    macro_rules! store_tile_avx512 {
        ($c:expr, $ldc:expr, $acc:expr, [$($c0:ident, $c1:ident),*]) => {
            let mut d = $c;
            $(
                store!(_mm512_loadu_ps, _mm512_storeu_ps, _mm512_add_ps, 16, d, $acc, $c0, $c1);
                d = d.add($ldc);
            )*
            let _ = d;
        };
    }

    /// Transpose 16 × 16 values held as 16 row vectors: returns the 16 column vectors (56–64 shuffles).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn transpose16(r: &[__m512; 16]) -> [__m512; 16] {
        // Per 128-bit lane L (columns 4L..4L+3): pairs of rows interleaved …
        let t: [__m512; 16] = std::array::from_fn(|j| {
            let (x, y) = (r[j / 4 * 4 + (j % 4) / 2 * 2], r[j / 4 * 4 + (j % 4) / 2 * 2 + 1]);
            if j % 2 == 0 { _mm512_unpacklo_ps(x, y) } else { _mm512_unpackhi_ps(x, y) }
        });
        // … then u[4g + q] holds, in lane L, rows 4g..4g+3 of column 4L + q …
        let u: [__m512; 16] = std::array::from_fn(|j| {
            let (g, q) = (j / 4, j % 4);
            let (x, y) = (t[4 * g + q / 2], t[4 * g + q / 2 + 2]);
            if q % 2 == 0 { _mm512_shuffle_ps::<0x44>(x, y) } else { _mm512_shuffle_ps::<0xEE>(x, y) }
        });
        // … and lane L of u[q], u[4 + q], u[8 + q], u[12 + q] together make column 4L + q.
        let mut out = [_mm512_setzero_ps(); 16];
        for q in 0..4 {
            let even_lo = _mm512_shuffle_f32x4::<0x88>(u[q], u[4 + q]);
            let odd_lo = _mm512_shuffle_f32x4::<0xDD>(u[q], u[4 + q]);
            let even_hi = _mm512_shuffle_f32x4::<0x88>(u[8 + q], u[12 + q]);
            let odd_hi = _mm512_shuffle_f32x4::<0xDD>(u[8 + q], u[12 + q]);
            out[q] = _mm512_shuffle_f32x4::<0x88>(even_lo, even_hi);
            out[4 + q] = _mm512_shuffle_f32x4::<0x88>(odd_lo, odd_hi);
            out[8 + q] = _mm512_shuffle_f32x4::<0xDD>(even_lo, even_hi);
            out[12 + q] = _mm512_shuffle_f32x4::<0xDD>(odd_lo, odd_hi);
        }
        out
    }

    /// Pack `src.len()` (≤ 32) contiguous source vectors of `kc` values each — the rows of a row-major A panel, or
    /// the columns of a column-major B panel — transposed into `dst[p * ld + j]`, 16 inner indices at a time
    /// through register transposes; returns how many indices were packed (the caller packs the remaining
    /// `kc % 16`). Positions `j ≥ src.len()` of `dst` are left as they are. The scalar scatter it replaces took a
    /// tenth of a training step.
    ///
    /// # Safety
    /// AVX-512F available; `src.len() ≤ ld`, `src.len() ≤ 32`; every `src[j]` valid for `kc` reads, `dst` for
    /// `kc * ld` writes.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn pack_transposed_avx512(src: &[*const f32], ld: usize, kc: usize, dst: *mut f32) -> usize {
        let n = src.len();
        let mut p = 0;
        while p + 16 <= kc {
            for c0 in (0..n).step_by(16) {
                let r = std::array::from_fn(|j| {
                    // SAFETY: source c0 + j exists (< n) and holds p + 16 <= kc values.
                    if c0 + j < n { unsafe { _mm512_loadu_ps(src[c0 + j].add(p)) } } else { _mm512_setzero_ps() }
                });
                let mask: __mmask16 = if n - c0 >= 16 { 0xffff } else { (1u16 << (n - c0)) - 1 };
                for (q, v) in transpose16(&r).into_iter().enumerate() {
                    // SAFETY: the masked lanes end at (p + q) * ld + n <= kc * ld.
                    unsafe { _mm512_mask_storeu_ps(dst.add((p + q) * ld + c0), mask, v) };
                }
            }
            p += 16;
        }
        p
    }

    /// The 12 × 32 tile over `kc` inner indices: `C[0..12, 0..32] (+)= A · Bp`, the value of row `i` at the current
    /// inner index read from the pointer `$at` (an expression of `$i`, a constant per row), then `$next` moves to
    /// the next index. Two zmm columns, twelve broadcast rows, 24 accumulators.
    macro_rules! tile_12x32 {
        ($kc:expr, $bp:expr, $c:expr, $ldc:expr, $acc:expr, |$i:ident| $at:expr, $next:block) => {{
            let z = _mm512_setzero_ps();
            let (mut c00, mut c01, mut c10, mut c11, mut c20, mut c21, mut c30, mut c31) = (z, z, z, z, z, z, z, z);
            let (mut c40, mut c41, mut c50, mut c51, mut c60, mut c61, mut c70, mut c71) = (z, z, z, z, z, z, z, z);
            let (mut c80, mut c81, mut c90, mut c91, mut ca0, mut ca1, mut cb0, mut cb1) = (z, z, z, z, z, z, z, z);
            let mut b = $bp;
            // The tile of C is read (or its lines owned) only after the loop: fetch it now so the misses overlap
            // the multiply-adds instead of stalling the stores.
            for r in 0..12 {
                _mm_prefetch::<_MM_HINT_T0>($c.add(r * $ldc) as *const i8);
                _mm_prefetch::<_MM_HINT_T0>($c.add(r * $ldc + 16) as *const i8);
            }
            for _ in 0..$kc {
                let b0 = _mm512_loadu_ps(b);
                let b1 = _mm512_loadu_ps(b.add(16));
                tile_12x32!(@rows b0, b1, |$i| $at, [0 c00 c01, 1 c10 c11, 2 c20 c21, 3 c30 c31, 4 c40 c41,
                    5 c50 c51, 6 c60 c61, 7 c70 c71, 8 c80 c81, 9 c90 c91, 10 ca0 ca1, 11 cb0 cb1]);
                $next
                b = b.add(32);
            }
            store_tile_avx512!(
                $c,
                $ldc,
                $acc,
                [
                    c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71, c80, c81, c90, c91,
                    ca0, ca1, cb0, cb1
                ]
            );
        }};
        (@rows $b0:ident, $b1:ident, |$i:ident| $at:expr, [$($row:literal $c0:ident $c1:ident),*]) => {
            $({
                let $i: usize = $row;
                let av = _mm512_set1_ps(*$at);
                $c0 = _mm512_fmadd_ps(av, $b0, $c0);
                $c1 = _mm512_fmadd_ps(av, $b1, $c1);
            })*
        };
    }

    /// 12 × 32 tile on a packed panel.
    ///
    /// # Safety
    /// AVX-512F available; sizes as [`super::Isa::kernel`].
    #[target_feature(enable = "avx512f")]
    pub unsafe fn kernel_avx512(kc: usize, ap: *const f32, bp: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        unsafe {
            let mut a = ap;
            tile_12x32!(kc, bp, c, ldc, accumulate, |i| a.add(i), {
                a = a.add(12);
            })
        }
    }

    /// [`kernel_avx512`] reading twelve rows of a row-major matrix in place: value `(i, p)` at `ap + i * rs + p`.
    /// The same multiply-adds in the same order, so the same bits as on the packed panel.
    ///
    /// # Safety
    /// AVX-512F available; `ap + i * rs` holds `kc` values for every `i < 12`; other sizes as
    /// [`super::Isa::kernel`].
    #[target_feature(enable = "avx512f")]
    pub unsafe fn kernel_avx512_rows(
        kc: usize,
        ap: *const f32,
        rs: usize,
        bp: *const f32,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        unsafe {
            // Three row pointers four rows apart, each with offsets 0, rs, 2 rs, 3 rs (few registers).
            let (mut a0, mut a4, mut a8) = (ap, ap.add(4 * rs), ap.add(8 * rs));
            let offsets = [0, rs, 2 * rs, 3 * rs];
            tile_12x32!(kc, bp, c, ldc, accumulate, |i| [a0, a4, a8][i / 4].add(offsets[i % 4]), {
                a0 = a0.add(1);
                a4 = a4.add(1);
                a8 = a8.add(1);
            })
        }
    }

    /// 6 × 16 tile: two ymm columns, six broadcast rows, 12 accumulators.
    ///
    /// # Safety
    /// AVX2 and FMA available; sizes as [`super::Isa::kernel`].
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn kernel_avx2(kc: usize, ap: *const f32, bp: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        unsafe {
            let z = _mm256_setzero_ps();
            let (mut c00, mut c01, mut c10, mut c11, mut c20, mut c21) = (z, z, z, z, z, z);
            let (mut c30, mut c31, mut c40, mut c41, mut c50, mut c51) = (z, z, z, z, z, z);
            let (mut a, mut b) = (ap, bp);
            for _ in 0..kc {
                let b0 = _mm256_loadu_ps(b);
                let b1 = _mm256_loadu_ps(b.add(8));
                row!(_mm256_set1_ps, _mm256_fmadd_ps, a, 0, b0, b1, c00, c01);
                row!(_mm256_set1_ps, _mm256_fmadd_ps, a, 1, b0, b1, c10, c11);
                row!(_mm256_set1_ps, _mm256_fmadd_ps, a, 2, b0, b1, c20, c21);
                row!(_mm256_set1_ps, _mm256_fmadd_ps, a, 3, b0, b1, c30, c31);
                row!(_mm256_set1_ps, _mm256_fmadd_ps, a, 4, b0, b1, c40, c41);
                row!(_mm256_set1_ps, _mm256_fmadd_ps, a, 5, b0, b1, c50, c51);
                a = a.add(6);
                b = b.add(16);
            }
            let (l, s, p) = (ldc, accumulate, c);
            store!(_mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, 8, p, s, c00, c01);
            store!(_mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, 8, p.add(l), s, c10, c11);
            store!(_mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, 8, p.add(2 * l), s, c20, c21);
            store!(_mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, 8, p.add(3 * l), s, c30, c31);
            store!(_mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, 8, p.add(4 * l), s, c40, c41);
            store!(_mm256_loadu_ps, _mm256_storeu_ps, _mm256_add_ps, 8, p.add(5 * l), s, c50, c51);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference product in f64.
    fn naive(a: &MatRef, b: &MatRef) -> Vec<f64> {
        let mut c = vec![0f64; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                c[i * b.cols + j] = (0..a.cols).map(|p| a.at(i, p) as f64 * b.at(p, j) as f64).sum();
            }
        }
        c
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        // A small LCG: deterministic values in [-1, 1).
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    fn kernels() -> Vec<Isa> {
        [Isa::Avx512, Isa::Avx2, Isa::Portable].into_iter().filter(|i| i.available()).collect()
    }

    #[test]
    fn packed_a_panels_hold_every_value_where_the_kernel_reads_it() {
        // The AVX-512 transpose covers 16 inner indices at a time; the widths straddle it.
        for isa in kernels() {
            let (mr, _) = isa.tile();
            for (rows, kc) in [(12, 16), (12, 17), (12, 40), (25, 256), (7, 33), (30, 1)] {
                let data = values(rows * (kc + 3), (rows * kc) as u32);
                let a = MatRef { data: &data, rows, cols: kc + 3, rs: kc + 3, cs: 1 };
                let mut out = vec![f32::NAN; 7];
                pack_a(isa, &a, 0, rows, 2, kc, &mut out);
                for panel in 0..rows.div_ceil(mr) {
                    for p in 0..kc {
                        for i in 0..mr {
                            let r = panel * mr + i;
                            let want = if r < rows { a.at(r, 2 + p) } else { 0.0 };
                            let got = out[panel * kc * mr + p * mr + i];
                            assert_eq!(got.to_bits(), want.to_bits(), "{isa:?} rows {rows} kc {kc} at ({r}, {p})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn packed_b_panels_hold_every_value_where_the_kernel_reads_it() {
        // Both layouts of B; the AVX-512 transpose of a transposed B covers 16 inner indices and 16 columns at a
        // time, the sizes straddle both.
        for isa in kernels() {
            let (_, nr) = isa.tile();
            for (kc, cols) in [(16, 32), (17, 31), (40, 70), (256, 16), (5, 3), (33, 17)] {
                for transposed in [false, true] {
                    let data = values((kc + 2) * (cols + 1), (kc * cols) as u32 + transposed as u32);
                    let b = if transposed {
                        MatRef { data: &data, rows: kc + 2, cols: cols + 1, rs: 1, cs: kc + 2 }
                    } else {
                        MatRef { data: &data, rows: kc + 2, cols: cols + 1, rs: cols + 1, cs: 1 }
                    };
                    for parallel in [false, true] {
                        let mut out = vec![f32::NAN; 3];
                        pack_b(isa, &b, 2, kc, 1, cols, parallel, &mut out);
                        for panel in 0..cols.div_ceil(nr) {
                            for p in 0..kc {
                                for j in 0..nr {
                                    let c = panel * nr + j;
                                    let want = if c < cols { b.at(2 + p, 1 + c) } else { 0.0 };
                                    let got = out[panel * kc * nr + p * nr + j];
                                    assert_eq!(got.to_bits(), want.to_bits(), "{isa:?} kc {kc} col {c} p {p}");
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_kernel_matches_the_reference_on_edge_shapes_and_strides() {
        // Shapes straddle every tile and block edge (MR, NR, KC, MC, NT); both operands in both layouts.
        for &(m, n, k) in &[(1, 1, 1), (13, 33, 7), (25, 70, 300), (97, 257, 513), (200, 31, 2)] {
            let ad = values(m * k, 1);
            let bd = values(k * n, 2);
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = if a_t { MatRef::row_major(&ad, k, m).t() } else { MatRef::row_major(&ad, m, k) };
                let b = if b_t { MatRef::row_major(&bd, n, k).t() } else { MatRef::row_major(&bd, k, n) };
                let want = naive(&a, &b);
                for isa in kernels() {
                    for parallel in [false, true] {
                        let mut c = vec![f32::NAN; m * n];
                        gemm_with(isa, a, b, &mut c, false, parallel).unwrap();
                        for (x, y) in c.iter().zip(&want) {
                            assert!((*x as f64 - y).abs() <= 1e-4 * (1.0 + y.abs()), "{isa:?} {m}×{n}×{k}: {x} vs {y}");
                        }
                        // Accumulating adds the product again.
                        gemm_with(isa, a, b, &mut c, true, parallel).unwrap();
                        for (x, y) in c.iter().zip(&want) {
                            assert!((*x as f64 - 2.0 * y).abs() <= 2e-4 * (1.0 + y.abs()), "{isa:?} accumulate");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn kernels_and_thread_counts_agree_bit_for_bit() {
        let (m, n, k) = (130, 300, 600);
        let ad = values(m * k, 3);
        let bd = values(k * n, 4);
        let (a, b) = (MatRef::row_major(&ad, m, k), MatRef::row_major(&bd, k, n));
        let mut first: Option<Vec<f32>> = None;
        for isa in kernels() {
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let mut c = vec![0f32; m * n];
                pool.install(|| gemm_with(isa, a, b, &mut c, false, true)).unwrap();
                match &first {
                    None => first = Some(c),
                    Some(f) => assert!(f.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()), "{isa:?} {threads}"),
                }
            }
        }
    }

    #[test]
    fn products_split_over_a_long_inner_dimension_are_accurate_and_thread_count_invariant() {
        // 2,100 inner values (9 slices): two parts; both operands in the weight-gradient layout (Xᵀ · dY), and an
        // output just over the split limit, which does not split.
        let (m, n, k): (usize, usize, usize) = (30, 70, 2100);
        assert_eq!(split_parts(m, n, k.div_ceil(KC)), 2);
        assert_eq!(split_parts(1024, 1025, k.div_ceil(KC)), 1);
        assert_eq!(split_parts(m, n, 7), 1);
        let ad = values(m * k, 11);
        let bd = values(k * n, 12);
        let (a, b) = (MatRef::row_major(&ad, k, m).t(), MatRef::row_major(&bd, k, n));
        let want = naive(&a, &b);
        let start = values(m * n, 13);
        let mut first: Option<Vec<f32>> = None;
        for isa in kernels() {
            for (threads, parallel) in [(1, true), (2, true), (3, true), (2, false)] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let mut c = vec![f32::NAN; m * n];
                pool.install(|| gemm_with(isa, a, b, &mut c, false, parallel)).unwrap();
                for (x, y) in c.iter().zip(&want) {
                    assert!((*x as f64 - y).abs() <= 1e-3 * (1.0 + y.abs()), "{isa:?} {threads}: {x} vs {y}");
                }
                match &first {
                    None => first = Some(c),
                    Some(f) => assert!(f.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()), "{isa:?} {threads}"),
                }
                // Accumulating adds the product to what C held.
                let mut acc = start.clone();
                pool.install(|| gemm_with(isa, a, b, &mut acc, true, parallel)).unwrap();
                for ((x, y), s) in acc.iter().zip(&want).zip(&start) {
                    assert!((*x as f64 - y - *s as f64).abs() <= 1e-3 * (1.0 + y.abs()), "{isa:?} accumulate");
                }
            }
        }
        // A pre-packed left operand splits the same way.
        let packed = PackedA::new(a).unwrap();
        let mut got = vec![0f32; m * n];
        gemm_packed(&packed, b, &mut got, false, true).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut same_isa = vec![0f32; m * n];
        gemm(a, b, &mut same_isa, false, true).unwrap();
        assert_eq!(bits(&got), bits(&same_isa));
    }

    #[test]
    fn prepacked_products_match_packing_per_call_bit_for_bit() {
        // Several row blocks and inner slices, accumulation; A transposed (as the encoders' weights), row-major,
        // and a row-major view with padded rows (as a head's columns of `qkv`). Products at most
        // `IN_PLACE_MAX_COLS` wide read A in place on AVX-512, so this also pins in-place reads to packed ones.
        for &(m, n, k) in &[(130, 70, 600), (7, 49, 16), (200, 3, 300), (1, 1, 1), (97, 128, 260), (40, 129, 33)] {
            let ad = values(m * (k + 5), 7);
            let bd = values(k * n, 8);
            let views = [
                MatRef::row_major(&ad[..m * k], k, m).t(),
                MatRef::row_major(&ad[..m * k], m, k),
                MatRef { data: &ad, rows: m, cols: k, rs: k + 5, cs: 1 },
            ];
            let b = MatRef::row_major(&bd, k, n);
            for (v, a) in views.into_iter().enumerate() {
                let packed = PackedA::new(a).unwrap();
                assert_eq!((packed.rows(), packed.cols()), (m, k));
                for (accumulate, parallel) in [(false, false), (true, true)] {
                    let mut want = values(m * n, 9);
                    let mut got = want.clone();
                    gemm(a, b, &mut want, accumulate, parallel).unwrap();
                    gemm_packed(&packed, b, &mut got, accumulate, parallel).unwrap();
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "view {v}: {m}x{n}x{k} accumulate {accumulate}");
                }
            }
        }
        let packed = PackedA::new(MatRef::row_major(&[1.0; 6], 2, 3)).unwrap();
        let err = gemm_packed(&packed, MatRef::row_major(&[1.0; 4], 2, 2), &mut [0.0; 4], false, false).unwrap_err();
        assert!(err.0.contains("A is 2×3"), "{err}");
    }

    #[test]
    fn bias_and_clamp_after_the_product_match_a_pass_over_it_bit_for_bit() {
        // One slice, several slices with column chunks past NC, a split inner dimension, and no inner dimension.
        for &(m, n, k) in &[(30, 70, 100), (13, 2100, 300), (40, 64, 2500), (5, 9, 0)] {
            let ad = values(m * k, 11);
            let bd = values(k * n, 12);
            let packed = PackedA::new(MatRef::row_major(&ad, m, k)).unwrap();
            let b = MatRef::row_major(&bd, k, n);
            let bias = values(m, 13);
            for (lo, hi, parallel) in [(0.0, 6.0, false), (-0.5, 0.25, true), (f32::NEG_INFINITY, f32::INFINITY, true)]
            {
                let mut want = vec![0f32; m * n];
                gemm_packed(&packed, b, &mut want, false, parallel).unwrap();
                want.chunks_mut(n.max(1)).zip(&bias).for_each(|(row, &b)| crate::math::add_clamp(row, b, lo, hi));
                let mut got = values(m * n, 14);
                gemm_packed_bias_clamp(&packed, b, &mut got, BiasClamp { bias: &bias, lo, hi }, parallel).unwrap();
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k} clamp [{lo}, {hi}]");
            }
        }
        let packed = PackedA::new(MatRef::row_major(&[1.0; 6], 2, 3)).unwrap();
        let b = MatRef::row_major(&[1.0; 6], 3, 2);
        let short = BiasClamp { bias: &[0.0], lo: 0.0, hi: 6.0 };
        assert!(gemm_packed_bias_clamp(&packed, b, &mut [0.0; 4], short, false).unwrap_err().0.contains("bias of 1"));
        let inverted = BiasClamp { bias: &[0.0; 2], lo: 6.0, hi: 0.0 };
        assert!(gemm_packed_bias_clamp(&packed, b, &mut [0.0; 4], inverted, false).is_err());
    }

    #[test]
    fn packed_right_operand_with_column_bias_is_the_transposed_product_bit_for_bit() {
        // Thin and tall outputs (A read in place up to 128 columns, packed beyond), several slices, column chunks
        // past NC, a split inner dimension, no inner dimension; A also as a strided view.
        for &(m, n, k) in &[(49, 40, 192), (784, 200, 96), (13, 2100, 300), (40, 64, 2500), (5, 9, 0), (3, 1, 7)] {
            let ad = values(m * k, 21);
            let bd = values(k * n, 22);
            let bias = values(n, 23);
            let a = MatRef::row_major(&ad, m, k);
            let b = MatRef::row_major(&bd, k, n);
            let packed_b = PackedB::new(b).unwrap();
            let packed_bt = PackedA::new(b.t()).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for (lo, hi, parallel) in [(0.0, 6.0, false), (-0.5, 0.25, true), (f32::NEG_INFINITY, f32::INFINITY, true)]
            {
                let clamp = BiasClamp { bias: &bias, lo, hi };
                let mut got = values(m * n, 24);
                gemm_packed_b_bias_clamp(a, &packed_b, &mut got, clamp, parallel).unwrap();
                // Cᵀ = Bᵀ·Aᵀ with the bias along its rows.
                let mut t = vec![0f32; n * m];
                gemm_packed_bias_clamp(&packed_bt, a.t(), &mut t, clamp, parallel).unwrap();
                let want: Vec<f32> = (0..m * n).map(|x| t[(x % n) * m + x / n]).collect();
                assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k} clamp [{lo}, {hi}]");
                // And the plain product followed by a pass.
                let mut plain = vec![0f32; m * n];
                gemm(a, b, &mut plain, false, parallel).unwrap();
                plain.chunks_mut(n).for_each(|row| crate::math::add_each_clamp(row, &bias, lo, hi));
                assert_eq!(bits(&got), bits(&plain), "{m}x{n}x{k} against a pass");
            }
            // A strided (transposed) A gives the same values.
            let at: Vec<f32> = (0..k * m).map(|x| ad[(x % m) * k + x / m]).collect();
            let strided = MatRef::row_major(&at, k, m).t();
            let (mut x, mut y) = (vec![0f32; m * n], vec![0f32; m * n]);
            let clamp = BiasClamp { bias: &bias, lo: -1.0, hi: 1.0 };
            gemm_packed_b_bias_clamp(a, &packed_b, &mut x, clamp, true).unwrap();
            gemm_packed_b_bias_clamp(strided, &packed_b, &mut y, clamp, false).unwrap();
            assert_eq!(bits(&x), bits(&y), "{m}x{n}x{k} strided A");
        }
        let b = PackedB::new(MatRef::row_major(&[1.0; 6], 3, 2)).unwrap();
        let a = MatRef::row_major(&[1.0; 6], 2, 3);
        let short = BiasClamp { bias: &[0.0], lo: 0.0, hi: 6.0 };
        let e = gemm_packed_b_bias_clamp(a, &b, &mut [0.0; 4], short, false).unwrap_err().0;
        assert!(e.contains("bias of 1 values for 2 columns"), "{e}");
        let nan = BiasClamp { bias: &[0.0; 2], lo: f32::NAN, hi: 0.0 };
        assert!(gemm_packed_b_bias_clamp(a, &b, &mut [0.0; 4], nan, false).is_err());
        let ok = BiasClamp { bias: &[0.0; 2], lo: 0.0, hi: 6.0 };
        assert!(gemm_packed_b_bias_clamp(a, &b, &mut [0.0; 3], ok, false).unwrap_err().0.contains("holds 3"));
        assert!(gemm_packed_b_bias_clamp(a.t(), &b, &mut [0.0; 6], ok, false).is_err(), "2 ≠ 3 inner");
    }

    #[test]
    fn batched_products_match_one_by_one() {
        let (batch, m, n, k) = (5, 9, 11, 40);
        let ad = values(batch * m * k, 5);
        let bd = values(batch * k * n, 6);
        let mut c = vec![0f32; batch * m * n];
        gemm_batched(batch, MatRef::row_major(&ad, m, k), m * k, MatRef::row_major(&bd, k, n), k * n, &mut c, false)
            .unwrap();
        for i in 0..batch {
            let mut one = vec![0f32; m * n];
            let a = MatRef::row_major(&ad[i * m * k..], m, k);
            let b = MatRef::row_major(&bd[i * k * n..], k, n);
            gemm(a, b, &mut one, false, false).unwrap();
            assert_eq!(one, c[i * m * n..(i + 1) * m * n]);
        }
    }

    #[test]
    fn mismatched_shapes_and_out_of_bounds_views_are_errors() {
        let d = values(12, 7);
        let a = MatRef::row_major(&d, 3, 4);
        let mut c = vec![0f32; 9];
        assert!(gemm(a, a, &mut c, false, false).is_err(), "4 ≠ 3 inner");
        let b = MatRef { data: &d, rows: 4, cols: 3, rs: 3, cs: 2 };
        assert!(gemm(a, b, &mut c, false, false).is_err(), "b reaches past its data");
        let b = MatRef::row_major(&d, 4, 3);
        let mut short = vec![0f32; 8];
        assert!(gemm(a, b, &mut short, false, false).is_err());
        gemm(a, b, &mut c, false, false).unwrap();
    }
}
