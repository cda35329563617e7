//! Patch grids in the feature store (`stepwise embed --patches --grid G`) with the built-in descriptor: the NumPy
//! file and its agreement with the descriptor of each cropped cell, pooled vectors unchanged, unsupported encoders
//! and grids, re-runs, resuming, setting mismatches, broken files and thread-count determinism. EfficientNet and
//! CLIP patch grids are checked in their unit tests (synthetic weights) and `acceptance_models.rs` (real weights).

use std::path::{Path, PathBuf};

use half::f16;
use stepwise_core::Corpus;
use stepwise_features::builtin::descriptor::{DIM, Descriptor};
use stepwise_features::embed::{EmbedOptions, EmbedReport, embed_corpus};
use stepwise_features::npy::parse_header;
use stepwise_features::patches::{PATCHES_FILE, adaptive_bins};
use stepwise_features::store::{FeatureStore, IDS_FILE, META_FILE, VECTORS_FILE, WORK_DIR};
use stepwise_features::{FeatureError, PatchGrids};

fn image(seed: u32) -> image::RgbImage {
    image::RgbImage::from_fn(40 + 3 * seed, 30 + seed, move |x, y| {
        let band = if (x / 7 + y / 5) % 2 == 0 { 30 } else { 220 };
        image::Rgb([((x * (seed + 3)) % 256) as u8, ((y * 7 + seed * 40) % 256) as u8, band])
    })
}

/// A corpus of `n` procedures with 2 steps of one image each (`i/p{p}s{s}.png`); procedure 1's second image is
/// corrupt (a failure).
fn write_corpus(dir: &Path, n: usize) -> PathBuf {
    std::fs::create_dir_all(dir.join("i")).unwrap();
    let mut lines = String::new();
    for p in 0..n {
        let mut steps = Vec::new();
        for s in 0..2 {
            let rel = format!("i/p{p}s{s}.png");
            if p == 1 && s == 1 {
                std::fs::write(dir.join(&rel), b"\x89PNG\r\n\x1a\n garbage").unwrap();
            } else {
                image((p * 2 + s) as u32 + 1).save(dir.join(&rel)).unwrap();
            }
            steps.push(serde_json::json!({"text": format!("Step {s} of {p}."), "images": [rel]}));
        }
        let proc = serde_json::json!({"id": format!("set/p{p}"), "title": format!("P{p}"), "steps": steps});
        lines.push_str(&proc.to_string());
        lines.push('\n');
    }
    let f = dir.join("procedures.jsonl");
    std::fs::write(&f, lines).unwrap();
    f
}

fn opts(grid: Option<usize>) -> EmbedOptions {
    let mut o = EmbedOptions::new("descriptor");
    o.patches = grid;
    o
}

fn embed(corpus: &Path, out: &Path, opts: &EmbedOptions) -> Result<EmbedReport, FeatureError> {
    embed_corpus(&Corpus::load(corpus).unwrap(), out, None, &[], opts)
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

const STORE_FILES: &[&str] =
    &[VECTORS_FILE, IDS_FILE, META_FILE, "keys", "failures.jsonl", "manifest.json", PATCHES_FILE];

#[test]
fn descriptor_patches_are_the_descriptors_of_the_cells() {
    let td = tempfile::tempdir().unwrap();
    let cdir = td.path().join("c");
    let corpus = write_corpus(&cdir, 4);
    let out = td.path().join("patches");
    let r = embed(&corpus, &out, &opts(Some(3))).unwrap();
    assert_eq!((r.stored, r.failed, r.patches, r.tokens), (7, 1, Some(63), None));

    let store = FeatureStore::open(&out).unwrap();
    let pm = store.meta().patches.clone().unwrap();
    assert_eq!((pm.grid, pm.dim, pm.dtype.as_str()), (3, DIM, "float16"));
    assert!(pm.patch.contains("cell") && pm.order.contains("row-major"), "{pm:?}");
    // The file as NumPy sees it: (items, 9, dim) float16.
    let bytes = read(&out.join(PATCHES_FILE));
    let h = parse_header(&out.join(PATCHES_FILE), &bytes).unwrap();
    assert_eq!((h.descr.as_str(), h.shape.clone()), ("<f2", vec![7, 9, DIM]));
    assert_eq!(bytes.len(), h.data_offset + 7 * 9 * DIM * 2);
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"patches\": 63") && manifest.contains("\"grid\": 3"), "{manifest}");

    let grids = PatchGrids::open(&out).unwrap().expect("patch grids");
    assert_eq!((grids.grid(), grids.per_item(), grids.dim, grids.len(), grids.ids()), (3, 9, DIM, 7, store.ids()));
    let d = Descriptor::new();
    for (i, id) in store.ids().iter().enumerate() {
        let rel = id.strip_prefix("image:").unwrap();
        let img = image::open(cdir.join(rel)).unwrap().to_rgb8();
        assert_eq!(store.row(i), &d.describe(&img)[..], "{id}: pooled vector unchanged");
        let all = grids.get(id).unwrap();
        assert_eq!(all.len(), 9 * DIM);
        // Patch (r, c) is the descriptor of cell (r, c), rounded to float16.
        let (rows, cols) = (adaptive_bins(img.height() as usize, 3), adaptive_bins(img.width() as usize, 3));
        for (r, ys) in rows.iter().enumerate() {
            for (c, xs) in cols.iter().enumerate() {
                let (x, y, w, h) = (xs.start as u32, ys.start as u32, xs.len() as u32, ys.len() as u32);
                let cell = d.describe(&image::imageops::crop_imm(&img, x, y, w, h).to_image());
                let want: Vec<f16> = cell.iter().map(|&v| f16::from_f32(v)).collect();
                assert_eq!(grids.patch_f16(i, r, c), &want[..], "{id} ({r}, {c})");
                assert_eq!(
                    &all[(r * 3 + c) * DIM..(r * 3 + c + 1) * DIM],
                    &want.iter().map(|v| v.to_f32()).collect::<Vec<_>>()[..]
                );
            }
        }
    }

    // Without --patches: the same pooled output byte for byte, no patches entry or file.
    let plain = td.path().join("plain");
    embed(&corpus, &plain, &opts(None)).unwrap();
    for f in [VECTORS_FILE, IDS_FILE, "keys", "failures.jsonl"] {
        assert_eq!(read(&plain.join(f)), read(&out.join(f)), "{f}");
    }
    assert!(!std::fs::read_to_string(plain.join(META_FILE)).unwrap().contains("\"patches\""));
    assert!(!plain.join(PATCHES_FILE).exists() && PatchGrids::open(&plain).unwrap().is_none());

    // Grid 1 is the pooled vector; the native grid 8 works.
    let g1 = td.path().join("g1");
    embed(&corpus, &g1, &opts(Some(1))).unwrap();
    let grids = PatchGrids::open(&g1).unwrap().unwrap();
    for (i, id) in store.ids().iter().enumerate() {
        let want: Vec<f32> = store.row(i).iter().map(|&v| f16::from_f32(v).to_f32()).collect();
        assert_eq!(grids.get(id).unwrap(), want, "{id}");
    }
    let g8 = td.path().join("g8");
    assert_eq!(embed(&corpus, &g8, &opts(Some(8))).unwrap().patches, Some(7 * 64));
}

#[test]
fn unsupported_encoders_and_grids_are_usage_errors() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 2);
    let out = td.path().join("feat");
    for encoder in ["w2v", "tfidf", "minilm", "effnet-lite0-logits", "clip-text"] {
        let mut o = EmbedOptions::new(encoder);
        o.patches = Some(3);
        let e = embed(&corpus, &out, &o).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{encoder}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(encoder) && msg.contains("descriptor, effnet-lite0, effnet-lite2, clip-image"), "{msg}");
        assert!(!out.exists(), "{encoder}: a refused run left {}", out.display());
    }
    for (encoder, grid) in [("descriptor", 0), ("descriptor", 9), ("effnet-lite0", 8), ("effnet-lite2", 10)] {
        let mut o = EmbedOptions::new(encoder);
        o.patches = Some(grid);
        let e = embed(&corpus, &out, &o).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{encoder} {grid}: {e}");
        assert!(e.to_string().contains(&format!("--grid {grid}")), "{e}");
        assert!(!out.exists());
    }
    let mut both = opts(Some(3));
    both.tokens = Some(4);
    assert_eq!(embed(&corpus, &out, &both).unwrap_err().exit_code(), 2);
}

#[test]
fn patch_outputs_are_identical_for_any_thread_count() {
    let td = tempfile::tempdir().unwrap();
    let corpus = write_corpus(&td.path().join("c"), 6);
    let run = |threads: usize| {
        let out = td.path().join(format!("t{threads}"));
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut o = opts(Some(3));
        o.chunk_items = 5;
        pool.install(|| embed(&corpus, &out, &o)).unwrap();
        out
    };
    let a = run(1);
    let b = run(2);
    for f in STORE_FILES {
        assert_eq!(read(&a.join(f)), read(&b.join(f)), "{f} differs between 1 and 2 threads");
    }
}

#[test]
fn patch_runs_resume_reuse_and_refuse_other_settings() {
    let td = tempfile::tempdir().unwrap();
    let cdir = td.path().join("c");
    let corpus = write_corpus(&cdir, 6);
    let out = td.path().join("feat");
    let mut o = opts(Some(2));
    o.chunk_items = 3;
    o.stop_after = Some(5);
    // Interrupted: chunks with patches in .work/, no store yet.
    let r = embed(&corpus, &out, &o).unwrap();
    assert!(r.interrupted && out.join(WORK_DIR).is_dir(), "{r:?}");
    assert!(PatchGrids::open(&out).is_err(), "an unfinished run is not a store");
    // Another grid cannot resume it.
    let e = embed(&corpus, &out, &opts(Some(3))).unwrap_err();
    assert!(matches!(e, FeatureError::Mismatch(_)) && e.to_string().contains("--grid 2"), "{e}");
    // Resume: identical to an uninterrupted run.
    o.stop_after = None;
    let r = embed(&corpus, &out, &o).unwrap();
    assert!(r.reused >= 6 && !r.interrupted, "{r:?}");
    let straight = td.path().join("straight");
    embed(&corpus, &straight, &opts(Some(2))).unwrap();
    for f in STORE_FILES {
        assert_eq!(read(&out.join(f)), read(&straight.join(f)), "{f}: resumed vs straight");
    }
    // Nothing new: up to date, nothing rewritten.
    let mtime = std::fs::metadata(out.join(PATCHES_FILE)).unwrap().modified().unwrap();
    let r = embed(&corpus, &out, &opts(Some(2))).unwrap();
    assert!(r.up_to_date && r.patches == Some(11 * 4), "{r:?}");
    assert_eq!(std::fs::metadata(out.join(PATCHES_FILE)).unwrap().modified().unwrap(), mtime);

    // Two more procedures: only their images are encoded, the store's patches are reused, and the result equals a
    // fresh run.
    let more = write_corpus(&cdir, 8);
    let r = embed(&more, &out, &opts(Some(2))).unwrap();
    assert_eq!(r.encoded, 4, "{r:?}");
    let fresh = td.path().join("fresh");
    embed(&more, &fresh, &opts(Some(2))).unwrap();
    for f in STORE_FILES {
        assert_eq!(read(&out.join(f)), read(&fresh.join(f)), "{f}: extended vs fresh");
    }

    // A store with patches is not extended without them (or with another grid), and vice versa; --force replaces.
    for other in [None, Some(3)] {
        let e = embed(&more, &out, &opts(other)).unwrap_err();
        assert!(matches!(e, FeatureError::Mismatch(_)), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("with patch grids (--patches --grid 2)") && msg.contains("--force"), "{msg}");
    }
    let plain = td.path().join("plain");
    embed(&more, &plain, &opts(None)).unwrap();
    let e = embed(&more, &plain, &opts(Some(2))).unwrap_err();
    assert!(e.to_string().contains("without patch grids"), "{e}");
    let mut forced = opts(Some(2));
    forced.force = true;
    embed(&more, &plain, &forced).unwrap();
    for f in STORE_FILES {
        assert_eq!(read(&plain.join(f)), read(&fresh.join(f)), "{f}: forced vs fresh");
    }

    // A patch file from another run (other grid, or cut short) is a clear error.
    let good = read(&out.join(PATCHES_FILE));
    std::fs::copy(straight.join(PATCHES_FILE), out.join(PATCHES_FILE)).unwrap();
    let e = PatchGrids::open(&out).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains(PATCHES_FILE) && e.to_string().contains("--force"), "{e}");
    std::fs::write(out.join(PATCHES_FILE), &good[..good.len() - 2]).unwrap();
    let e = PatchGrids::open(&out).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
}
