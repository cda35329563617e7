//! The demo's sequencing stages: the instances, the baselines and their evaluation.

use super::*;

/// Stage `sequencing`: multimodal instances (text and image per step) with every valid order as a reference.
pub(super) fn sequencing(d: &mut Demo) -> anyhow::Result<String> {
    let (seed, windows) = (d.seed.to_string(), d.windows.to_string());
    stepwise(&[
        "generate",
        CLEAN,
        "--task",
        "sequencing",
        "--modality",
        "multimodal",
        "--windows",
        &windows,
        "--seed",
        &seed,
        "-o",
        SEQUENCING,
    ])?;
    let m = Manifest::read(Path::new(SEQUENCING))?;
    let c = |k: &str| m.counts.get(k).copied().unwrap_or(0);
    Ok(format!(
        "{} five-step instances (train {}, val {}, test {}); {} with several valid orders, {} references in all",
        c("instances"),
        c("instances_train"),
        c("instances_val"),
        c("instances_test"),
        c("instances_multi_reference"),
        c("references")
    ))
}

/// The multi-reference PMR of a (method, features) row of the baseline table, with its interval.
fn table_pmr(results: &Value, method: &str, features: &str) -> Option<String> {
    let row = results.get("rows")?.as_array()?.iter().find(|r| r["method"] == method && r["features"] == features)?;
    pct_at(row, "/multi/pmr")
}

/// Stage `baselines`: every baseline with text, image and multimodal features, scored on the test split.
pub(super) fn baselines(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&[
        "baseline",
        SEQUENCING,
        "--table",
        "world",
        "--features",
        TEXT_FEATURES,
        "--features",
        IMAGE_FEATURES,
        "--seed",
        &seed,
        "-o",
        SEQ_RESULTS,
    ])?;
    let r = json(&format!("{SEQ_RESULTS}/results.json"))?;
    let rows = r.get("rows").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let n = rows.first().and_then(|r| r["sequences"].as_u64()).unwrap_or(0);
    let pmr = |m: &str, f: &str| table_pmr(&r, m, f).unwrap_or_else(|| "–".into());
    Ok(format!(
        "{} baseline runs; multi-reference PMR [95% CI] on {n} test sequences: pairwise text {}, image {}, \
         multimodal {}; random {}",
        rows.len(),
        pmr("pairwise", "text"),
        pmr("pairwise", "image"),
        pmr("pairwise", "multimodal"),
        pmr("random", "-")
    ))
}

/// Stage `eval-baselines`: score two of the baselines' prediction files with `stepwise eval`.
pub(super) fn eval_baselines(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    let mut parts = Vec::new();
    for name in ["pairwise-multimodal", "random"] {
        let preds = format!("{SEQ_RESULTS}/predictions/{name}.jsonl");
        let out = format!("eval/{name}");
        stepwise(&["eval", SEQUENCING, "-p", &preds, "--split", "test", "--seed", &seed, "-o", &out])?;
        let file = format!("{out}/results.json");
        let r = json(&file)?;
        parts.push(format!(
            "{name}: PMR {}, τ {:.3} ({} sequences)",
            pct_estimate(&r, &file, "/groups/0/metrics/pmr")?,
            number(&r, &file, "/groups/0/metrics/kendall_tau/value")?,
            number(&r, &file, "/groups/0/sequences")?
        ));
    }
    Ok(format!("{} (test split, best valid order; PMR [95% CI])", parts.join("; ")))
}
