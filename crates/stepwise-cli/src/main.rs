//! The `stepwise` binary: the command line lives in the library (`src/lib.rs`).
//!
//! Exit codes: 0 success, 1 runtime failure, 2 bad input or usage.

// mimalloc: the sweep makes millions of small allocations, which glibc malloc serves markedly slower
// (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    stepwise_cli::allocator::keep_freed_memory();
    stepwise_cli::main()
}
