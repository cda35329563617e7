//! `stepwise embed --patches [--grid G]` and the token ids of `--tokens` end to end on a small world corpus: the
//! files, byte-identical stores for `--threads 1` and `2`, resuming after `kill -9`, and usage errors (exit 2).

use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{bin, run};

fn ok(args: &[&str]) -> String {
    let (code, _, err) = run(bin().args(args));
    assert_eq!(code, 0, "stepwise {}: {err}", args.join(" "));
    err
}

/// The store files whose bytes must not depend on threads or interruptions.
const FILES: &[&str] = &["vectors.npy", "ids", "keys", "meta.json", "failures.jsonl", "manifest.json", "patches.npy"];

fn same_store(a: &Path, b: &Path) {
    for f in FILES {
        let (x, y) = (std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap());
        assert!(x == y, "{f} differs between {} and {}", a.display(), b.display());
    }
}

#[test]
fn patch_grids_are_deterministic_resumable_and_checked() {
    let td = tempfile::tempdir().unwrap();
    let p = |name: &str| td.path().join(name).to_string_lossy().into_owned();
    ok(&["world", "generate", "-n", "30", "--seed", "5", "-o", &p("world"), "-q"]);

    // Default grid 3, one thread and two; one image per checkpoint (the manifest records the command line, so the
    // killed run below uses the same arguments).
    let embed = |out: &str, threads: &str| {
        let args = ["embed", &p("world"), "--encoder", "descriptor", "--patches", "-o", out, "--chunk-items", "1"];
        ok(&[&args[..], &["--threads", threads]].concat())
    };
    let err = embed(&p("t1"), "1");
    assert!(err.contains("patch vectors (3x3 per image) in patches.npy"), "{err}");
    embed(&p("t2"), "2");
    same_store(Path::new(&p("t1")), Path::new(&p("t2")));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(td.path().join("t1/meta.json")).unwrap()).unwrap();
    assert_eq!((meta["patches"]["grid"].as_u64(), meta["patches"]["dim"].as_u64()), (Some(3), Some(480)));
    let count = meta["count"].as_u64().unwrap() as usize;
    let patches = std::fs::read(td.path().join("t1/patches.npy")).unwrap();
    let header = String::from_utf8_lossy(&patches[..128]).into_owned();
    assert!(header.contains(&format!("'shape': ({count}, 9, 480)")) && header.contains("'<f2'"), "{header}");

    // kill -9 in the middle of a run, then the same command: the same bytes.
    let killed = p("killed");
    let args = ["embed", &p("world"), "--encoder", "descriptor", "--patches", "-o", &killed, "--chunk-items", "1"];
    let mut child = bin().args(args).args(["--threads", "1", "-q"]).spawn().unwrap();
    let chunk = td.path().join("killed/.work/chunk-000002.bin");
    let started = Instant::now();
    while !chunk.exists() {
        assert!(started.elapsed() < Duration::from_secs(120), "no checkpoint appeared");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its third checkpoint was seen");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!td.path().join("killed/meta.json").exists(), "killed before the end: no store");
    ok(&args);
    same_store(Path::new(&killed), Path::new(&p("t1")));

    // Re-run with nothing new: up to date. Without --patches (or another grid) the store is not extended.
    let err = embed(&p("t1"), "2");
    assert!(err.contains("0 new items"), "{err}");
    let (code, _, err) = run(bin().args(["embed", &p("world"), "--encoder", "descriptor", "-o", &p("t1")]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("with patch grids (--patches --grid 3)") && err.contains("--force"), "{err}");

    // Usage errors: exit 2, naming the option or the encoders that support it; nothing written.
    let bad: &[(&[&str], &str)] = &[
        (&["--encoder", "descriptor", "--patches", "--grid", "0"], "--grid 0"),
        (&["--encoder", "descriptor", "--patches", "--grid", "9"], "--grid 9"),
        (&["--encoder", "effnet-lite0", "--patches", "--grid", "8"], "--grid 8"),
        (&["--encoder", "descriptor", "--grid", "3"], "--patches"),
        (&["--encoder", "w2v", "--patches"], "descriptor, effnet-lite0, effnet-lite2, clip-image"),
        (&["--encoder", "w2v", "--patches", "--tokens"], "--tokens"),
    ];
    for (extra, needle) in bad {
        let (code, _, err) = run(bin().args(["embed", &p("world"), "-o", &p("bad")]).args(*extra));
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!td.path().join("bad").exists(), "{extra:?} wrote something");
    }

    // --tokens stores the vocabulary id of every token.
    ok(&["embed", &p("world"), "--encoder", "w2v", "--tokens", "-o", &p("w2v"), "-q"]);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(td.path().join("w2v/meta.json")).unwrap()).unwrap();
    let total = meta["tokens"]["total"].as_u64().unwrap();
    assert!(meta["tokens"]["vocab"]["size"].as_u64().unwrap() > 10, "{meta}");
    let ids = std::fs::read(td.path().join("w2v/token_ids.npy")).unwrap();
    let header = String::from_utf8_lossy(&ids[..128]).into_owned();
    assert!(header.contains(&format!("'shape': ({total},)")) && header.contains("'<i8'"), "{header}");
}
