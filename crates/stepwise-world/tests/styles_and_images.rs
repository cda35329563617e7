//! Shared visual styles (`WorldParams::styles`) and on-demand rendering: procedures in the same shared style
//! share their background, lighting and camera; the choice is recorded in the manifest and the annotations;
//! the default (one style per procedure) is unchanged; and `WorldImages::render`, with its cache of recent
//! procedures, gives exactly the images a stored corpus has, in any request order and from several threads.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;
use stepwise_core::Corpus;
use stepwise_world::{Domain, WorldImages, WorldParams, WorldTruth, generate, render_procedure_images, write_corpus};

/// The style procedure `i` is drawn in (background, lighting, camera), as text for comparison.
fn style(params: &WorldParams, i: u64) -> String {
    format!("{:?}", params.backdrop(i).style)
}

/// Share of pixels whose channels all agree within 12 (sensor noise is ±3.5): background agreement.
fn agreement(a: &image::RgbImage, b: &image::RgbImage) -> f64 {
    let same =
        a.pixels().zip(b.pixels()).filter(|(p, q)| (0..3).all(|k| (p[k] as i32 - q[k] as i32).abs() <= 12)).count();
    same as f64 / a.pixels().len() as f64
}

#[test]
fn shared_styles_are_recorded_and_shared() {
    for domain in [Domain::Cooking, Domain::Assembly] {
        let mut params = WorldParams::new(9, domain, 24);
        params.image_size = 64;
        params.images_stored = false;
        params.styles = Some(3);
        let procs = generate(&params).unwrap();
        let mut by_style: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (i, p) in procs.iter().enumerate() {
            let truth = WorldTruth::of(p).unwrap();
            let style = truth.style.expect("annotations.world.style is set with shared styles");
            assert!(style < 3);
            assert_eq!(params.style_of(i as u64), Some(style));
            by_style.entry(style).or_default().push(i as u64);
        }
        assert_eq!(by_style.len(), 3, "{domain:?}: 24 procedures use all 3 styles: {by_style:?}");
        // Same shared style: the same background, lighting and camera; different ones: different.
        for (k, members) in &by_style {
            for &i in members {
                assert_eq!(style(&params, i), style(&params, members[0]), "{domain:?}: style {k}");
            }
        }
        let reps: Vec<u64> = by_style.values().map(|v| v[0]).collect();
        for i in 0..reps.len() {
            for j in i + 1..reps.len() {
                assert_ne!(style(&params, reps[i]), style(&params, reps[j]));
            }
        }
        // In pixels: two procedures of one style agree on most of the picture (the background), two of
        // different styles on little of it.
        let first_image = |i: u64| render_procedure_images(&params, i).unwrap().remove(0);
        let group = by_style.values().find(|v| v.len() >= 2).expect("24 procedures in 3 styles");
        let same = agreement(&first_image(group[0]), &first_image(group[1]));
        let other = by_style.values().find(|v| v[0] != group[0]).unwrap()[0];
        let different = agreement(&first_image(group[0]), &first_image(other));
        assert!(
            same > 0.3 && different < 0.5 * same,
            "{domain:?}: agreement {same:.2} in one style, {different:.2} across"
        );
    }
}

#[test]
fn default_worlds_have_one_style_per_procedure_and_no_style_field() {
    let params = WorldParams::new(9, Domain::Cooking, 6);
    assert_eq!(params.style_of(0), None);
    let json = serde_json::to_value(&params).unwrap();
    assert!(json.get("styles").is_none(), "the default is not written, so older manifests read back the same");
    for p in generate(&params).unwrap() {
        let world = &p.annotations.as_ref().unwrap().world.as_ref().unwrap();
        assert!(world.get("style").is_none());
    }
    // Own styles: every procedure's differs.
    let styles: BTreeSet<String> = (0..6).map(|i| style(&params, i)).collect();
    assert_eq!(styles.len(), 6);
}

#[test]
fn manifest_records_styles_and_rejects_zero() {
    let td = tempfile::tempdir().unwrap();
    let mut params = WorldParams::new(2, Domain::Assembly, 5);
    params.images_stored = false;
    params.styles = Some(2);
    write_corpus(&params, &td.path().join("c"), false, &|_| {}).unwrap();
    let corpus = Corpus::load(&td.path().join("c")).unwrap();
    let back = WorldParams::from_manifest(corpus.manifest.as_ref().unwrap()).unwrap().unwrap();
    assert_eq!(back.styles, Some(2));
    assert_eq!(back, params);
    params.styles = Some(0);
    let e = write_corpus(&params, &td.path().join("d"), false, &|_| {}).unwrap_err();
    assert_eq!(e.exit_code(), 2);
}

#[test]
fn on_demand_images_equal_stored_ones_in_any_order_and_thread_count() {
    for styles in [None, Some(2)] {
        let td = tempfile::tempdir().unwrap();
        let mut params = WorldParams::new(4, Domain::Cooking, 40);
        params.image_size = 48;
        params.styles = styles;
        write_corpus(&params, &td.path().join("c"), false, &|_| {}).unwrap();
        let corpus = Corpus::load(&td.path().join("c")).unwrap();
        let world = WorldImages::from_manifest(corpus.manifest.as_ref().unwrap()).unwrap().unwrap();
        let mut paths: Vec<&str> = corpus.procedures.iter().flat_map(|p| p.step_images()).collect();
        assert_eq!(paths.iter().collect::<BTreeSet<_>>().len(), paths.len(), "image paths are unique");
        // Interleave procedures (more than the cache holds) so the cache is exercised by misses and hits.
        paths.sort_by_key(|p| stepwise_core::hash::hash64(&[p.as_bytes()]));
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let rendered: Vec<image::RgbImage> =
            pool.install(|| paths.par_iter().map(|p| world.render(p).unwrap()).collect());
        for (p, img) in paths.iter().zip(&rendered) {
            // Stored JPEGs are lossy: compare with the same image encoded the same way.
            let stored = std::fs::read(td.path().join("c").join(p)).unwrap();
            assert_eq!(stepwise_world::corpus::encode_jpeg(img).unwrap(), stored, "{p} ({styles:?})");
        }
    }
}
