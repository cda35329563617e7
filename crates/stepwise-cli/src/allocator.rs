//! Settings of the binary's global allocator (mimalloc, `src/main.rs`).

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e`, mimalloc.h, the same in v2 and v3):
/// libmimalloc-sys names no constant for it.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keep freed memory committed for reuse instead of returning it to the OS (mimalloc v3, libmimalloc-sys' default
/// build, purges freed memory a second after it is freed). Large runs free and reallocate big buffers all the
/// time (the sweep's gathered list rows, task-set rows on their way to disk; training's tensors of tens of
/// megabytes at every op, as candle's CPU backend has no buffer pool): each purged page reused costs a page fault
/// and zeroing. Peak resident memory barely grows, as the freed memory is reused, not accumulated; a finite delay
/// does not help (it is all or nothing). Set for every command, training included, before anything allocates.
/// Measurements: docs/performance.md.
pub fn keep_freed_memory() {
    // SAFETY: sets one integer in mimalloc's options table, which it reads on later frees; valid at any time.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_option_set_is_mimallocs_purge_delay() {
        // mimalloc v3's options table (src/options.c): the purge delay defaults to 1000 (ms), no other option does.
        // SAFETY: reads one integer of mimalloc's options table.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(super::PURGE_DELAY) }, 1000);
    }
}
