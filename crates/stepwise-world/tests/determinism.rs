//! Same seed, same bytes: a corpus written with a pool of 1 thread and one of 2 threads is identical, file by
//! file (JSONL, Parquet, manifest, every JPEG).

use std::collections::BTreeMap;
use std::path::Path;

use stepwise_world::{Domain, WorldParams, write_corpus};

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    stepwise_core::output::read_tree(dir).unwrap()
}

fn write_with_threads(threads: usize, params: &WorldParams, dest: &Path) {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| write_corpus(params, dest, false, &|_| {})).unwrap();
}

#[test]
fn output_is_byte_identical_for_any_thread_count() {
    for domain in [Domain::Cooking, Domain::Assembly] {
        let td = tempfile::tempdir().unwrap();
        let mut params = WorldParams::new(3, domain, 10);
        params.image_size = 64;
        write_with_threads(1, &params, &td.path().join("one"));
        write_with_threads(2, &params, &td.path().join("two"));
        let (a, b) = (files(&td.path().join("one")), files(&td.path().join("two")));
        assert!(a.len() > 50, "{domain:?}: {} files", a.len());
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (k, v) in &a {
            assert!(v == &b[k], "{domain:?}: {k} differs between 1 and 2 threads");
        }
    }
}

#[test]
fn another_seed_gives_another_corpus_and_no_images_keeps_paths() {
    let td = tempfile::tempdir().unwrap();
    let mut p = WorldParams::new(1, Domain::Cooking, 4);
    p.images_stored = false;
    write_corpus(&p, &td.path().join("a"), false, &|_| {}).unwrap();
    p.seed = 2;
    write_corpus(&p, &td.path().join("b"), false, &|_| {}).unwrap();
    let a = std::fs::read(td.path().join("a/procedures.jsonl")).unwrap();
    let b = std::fs::read(td.path().join("b/procedures.jsonl")).unwrap();
    assert_ne!(a, b);
    assert!(!td.path().join("a/images").exists(), "--no-images stores no images");
    let corpus = stepwise_core::Corpus::load(&td.path().join("a")).unwrap();
    let first = &corpus.procedures[0].steps[0].images[0];
    assert_eq!(first, &stepwise_world::truth::image_path(Domain::Cooking, 0, 0));
    assert!(!first.ends_with("/00.jpg"), "file names do not number the steps: {first}");
    let world = stepwise_world::WorldImages::from_manifest(corpus.manifest.as_ref().unwrap()).unwrap().unwrap();
    assert!(!world.params.images_stored);
    let img = world.render(first).unwrap();
    assert_eq!(img.dimensions(), (224, 224));
    assert_eq!(img, stepwise_world::render_image(&world.params, 0, 0).unwrap());
    assert!(world.render("images/world-cooking_000009/00.jpg").is_err(), "index beyond the corpus");
    assert!(world.render("images/other/00.jpg").is_err());
}

#[test]
fn existing_output_is_not_replaced_without_overwrite() {
    let td = tempfile::tempdir().unwrap();
    let dest = td.path().join("c");
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("keep.txt"), "x").unwrap();
    let mut p = WorldParams::new(1, Domain::Assembly, 2);
    p.images_stored = false;
    let e = write_corpus(&p, &dest, false, &|_| {}).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(dest.join("keep.txt").exists());
    p.image_size = 4;
    let e = write_corpus(&p, &td.path().join("d"), false, &|_| {}).unwrap_err();
    assert_eq!(e.exit_code(), 2, "bad image size is a usage error");
}

#[test]
fn large_corpora_are_written_in_chunks_and_merged() {
    // More than one 1024-procedure chunk: the Parquet parts are merged into one file with every row.
    let td = tempfile::tempdir().unwrap();
    let mut p = WorldParams::new(5, Domain::Assembly, 1100);
    p.images_stored = false;
    let s = write_corpus(&p, &td.path().join("big"), false, &|_| {}).unwrap();
    assert_eq!(s.procedures, 1100);
    let dir = td.path().join("big");
    assert_eq!(stepwise_core::parquet::row_count(&dir.join("procedures.parquet")).unwrap(), 1100);
    let corpus = stepwise_core::Corpus::load(&dir).unwrap();
    assert_eq!(corpus.procedures.len(), 1100);
    assert_eq!(corpus.procedures[1099].id, "world-assembly/001099");
    assert_eq!(corpus.manifest.unwrap().counts["steps"], s.steps);
    assert!(!dir.join(".parquet-parts").exists());
}
