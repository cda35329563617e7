//! libFuzzer entry point: `STEPWISE_FUZZ_TARGET=<target> stepwise-fuzz [libFuzzer flags] CORPUS...`.
//! The targets are `stepwise_cli::fuzz_targets::TARGETS`; `scripts/fuzz/fuzz.py` builds and runs them.
//! With `STEPWISE_FUZZ_WRITE_SEEDS=DIR` the binary writes the target's built-in seeds into DIR and exits.
#![no_main]

use std::sync::OnceLock;

use stepwise_cli::fuzz_targets;

fn target() -> &'static str {
    static TARGET: OnceLock<String> = OnceLock::new();
    TARGET.get_or_init(|| match std::env::var("STEPWISE_FUZZ_TARGET") {
        Ok(t) if fuzz_targets::TARGETS.contains(&t.as_str()) => t,
        _ => {
            eprintln!("set STEPWISE_FUZZ_TARGET to one of: {}", fuzz_targets::TARGETS.join(", "));
            std::process::exit(2);
        }
    })
}

fn write_seeds_and_exit(dir: &str) -> ! {
    let written = fuzz_targets::builtin_seeds(target()).and_then(|seeds| {
        std::fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
        for (name, bytes) in &seeds {
            let path = std::path::Path::new(dir).join(name);
            std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(seeds.len())
    });
    fuzz_targets::remove_scratch();
    match written {
        Ok(n) => {
            println!("{n} seeds");
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1)
        }
    }
}

libfuzzer_sys::fuzz_target!(
    init: {
        if let Ok(dir) = std::env::var("STEPWISE_FUZZ_WRITE_SEEDS") {
            write_seeds_and_exit(&dir);
        }
        let _ = target();
    },
    |data: &[u8]| {
        // A reader's refusal is a normal outcome; a panic (including "the error does not name the file") is a
        // finding.
        let _ = fuzz_targets::run(target(), data);
    }
);
