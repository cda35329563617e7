//! The demo's stages from the world to the audit: the corpus, its cleaning and statistics, the contact sheet,
//! the two feature stores, the RecipeQA-mode task set, the knob sweep and its audit.

use super::*;

/// Stage `world`: generate the corpus with stored images.
pub(super) fn world(d: &mut Demo) -> anyhow::Result<String> {
    let args = world_args(d);
    let mut argv: Vec<&str> = vec!["world", "generate"];
    argv.extend(args.iter().map(String::as_str));
    argv.extend(["-o", CORPUS]);
    stepwise(&argv)?;
    let m = Manifest::read(Path::new(CORPUS))?;
    let c = |k: &str| m.counts.get(k).copied().unwrap_or(0);
    let styles = if d.styles > 0 {
        format!("{} shared kitchen styles", d.styles)
    } else {
        "one visual style per procedure".to_string()
    };
    Ok(format!(
        "{} {} procedures, {} steps, {} step images in {CORPUS}/; world parameters: `{}` ({styles})",
        c("procedures"),
        d.domain,
        c("steps"),
        c("step_images"),
        args.join(" ")
    ))
}

/// Stage `clean`: the default cleaning (Meta-RecipeQA's 3–25 steps, markup, spacing, fused words).
pub(super) fn clean(_: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["clean", CORPUS, "-o", CLEAN])?;
    let r = json(&format!("{CLEAN}/clean_report.json"))?;
    let f = |p: &str| number(&r, "clean_report.json", p);
    let edits: f64 = r
        .get("rules")
        .and_then(Value::as_object)
        .map(|rules| rules.values().filter_map(|x| x.get("edits").and_then(Value::as_f64)).sum())
        .unwrap_or(0.0);
    Ok(format!(
        "{} → {} procedures, {} → {} steps, {edits} text edits",
        f("/procedures_in")?,
        f("/procedures_out")?,
        f("/steps_in")?,
        f("/steps_out")?
    ))
}

/// Stage `stats`: corpus statistics as JSON (read by the report).
pub(super) fn stats(_: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["stats", CLEAN, "--format", "json", "-o", "stats.json"])?;
    let s = json("stats.json")?;
    let f = |p: &str| number(&s, "stats.json", p);
    Ok(format!(
        "{:.1} steps per procedure, {:.1} tokens per step, {} word types",
        f("/all/steps_per_procedure/mean")?,
        f("/all/tokens_per_step/mean")?,
        f("/all/types")?
    ))
}

/// The procedure shown on the contact sheet: the first with 8 to 12 steps (else the first).
fn showcase(procs: &[Procedure]) -> Option<&Procedure> {
    procs.iter().find(|p| (8..=12).contains(&p.steps.len())).or(procs.first())
}

/// Stage `contact-sheet`: one procedure's step images side by side with captions.
pub(super) fn sheet(_: &mut Demo) -> anyhow::Result<String> {
    let corpus = Corpus::load(Path::new(CORPUS))?;
    let p = showcase(&corpus.procedures).context("the corpus has no procedures")?;
    stepwise(&["world", "sheet", CORPUS, "--procedure", &p.id, "--columns", "4", "-o", "contact_sheet.png"])?;
    Ok(format!("contact_sheet.png: {} ({} steps)", p.id, p.steps.len()))
}

fn embed_summary(store: &str) -> anyhow::Result<String> {
    let m = json(&format!("{store}/meta.json"))?;
    let f = |p: &str| number(&m, "meta.json", p);
    Ok(format!(
        "{} items → {}-d `{}` vectors in {store}/ ({} failures)",
        f("/count")?,
        f("/encoder/dim")?,
        m.pointer("/encoder/name").and_then(Value::as_str).unwrap_or("?"),
        f("/failures")?
    ))
}

/// Stage `embed-text`: word2vec trained on the corpus's own step texts (no weights to download).
pub(super) fn embed_text(d: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["embed", CLEAN, "--encoder", "w2v", "--seed", &d.seed.to_string(), "-o", TEXT_FEATURES])?;
    embed_summary(TEXT_FEATURES)
}

/// Stage `embed-image`: the classical colour + gradient descriptor.
pub(super) fn embed_image(_: &mut Demo) -> anyhow::Result<String> {
    stepwise(&["embed", CLEAN, "--encoder", "descriptor", "-o", IMAGE_FEATURES])?;
    embed_summary(IMAGE_FEATURES)
}

/// Stage `tasks`: the four RecipeQA tasks, made the way RecipeQA made them.
pub(super) fn tasks(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&[
        "generate",
        CLEAN,
        "--features",
        TEXT_FEATURES,
        "--features",
        IMAGE_FEATURES,
        "--task",
        "all",
        "--mode",
        "recipeqa",
        "--seed",
        &seed,
        "-o",
        TASKS,
    ])?;
    let m = Manifest::read(Path::new(TASKS))?;
    let parts: Vec<String> = Task::ALL
        .iter()
        .map(|t| format!("{t} {}", m.counts.get(&format!("{t}.questions")).copied().unwrap_or(0)))
        .collect();
    Ok(format!("RecipeQA-mode questions: {}", parts.join(", ")))
}

/// `counts.json` of the suite: (setting, task) → questions, for the task sets the suite wrote (a row with
/// `same_as` — visual ordering with k3 = 1 — is the task set of another setting and is left out).
fn suite_counts() -> anyhow::Result<BTreeMap<(String, String), u64>> {
    let v = json(&format!("{SUITE}/counts.json"))?;
    let rows = v.as_array().context("suite/counts.json: expected an array")?;
    let mut out = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.get("same_as").is_some() {
            continue;
        }
        let s = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .with_context(|| format!("suite/counts.json: [{i}].{k}"))
        };
        let q = r
            .get("questions")
            .and_then(Value::as_u64)
            .with_context(|| format!("suite/counts.json: [{i}].questions"))?;
        out.insert((s("setting")?, s("task")?), q);
    }
    Ok(out)
}

/// Stage `sweep`: RecipeQA mode and the 8 knob settings, every task.
pub(super) fn sweep(d: &mut Demo) -> anyhow::Result<String> {
    let seed = d.seed.to_string();
    stepwise(&[
        "sweep",
        CLEAN,
        "--features",
        TEXT_FEATURES,
        "--features",
        IMAGE_FEATURES,
        "--seed",
        &seed,
        "-o",
        SUITE,
    ])?;
    let counts = suite_counts()?;
    let settings: std::collections::BTreeSet<&str> = counts.keys().map(|(s, _)| s.as_str()).collect();
    let tasks: std::collections::BTreeSet<&str> = counts.keys().map(|(_, t)| t.as_str()).collect();
    let vc = |s: &str| counts.get(&(s.to_string(), "visual_cloze".to_string())).copied().unwrap_or(0);
    Ok(format!(
        "{} task sets ({} settings × {} tasks, visual ordering once per (k1, k2)), {} questions; visual cloze: {} \
         in RecipeQA mode, {} in each knob setting with k1 = 0 (paired: the same questions in all four)",
        counts.len(),
        settings.len(),
        tasks.len(),
        counts.values().sum::<u64>(),
        vc("recipeqa"),
        vc("knobs-0-1-1")
    ))
}

/// Stage `audit`: the Hasty Student and the distance probe on every non-empty task set of the sweep.
pub(super) fn audit(d: &mut Demo) -> anyhow::Result<String> {
    let counts = suite_counts()?;
    let seed = d.seed.to_string();
    let (mut audited, mut empty) = (0, Vec::new());
    for ((setting, task), n) in &counts {
        if *n == 0 {
            // Nothing to audit; named in the summary rather than skipped silently.
            empty.push(format!("{setting}/{task}"));
            continue;
        }
        let input = format!("{SUITE}/{setting}/{task}");
        let out = format!("audit/{setting}/{task}");
        stepwise(&[
            "audit",
            &input,
            "--features",
            TEXT_FEATURES,
            "--features",
            IMAGE_FEATURES,
            "--seed",
            &seed,
            "-o",
            &out,
        ])?;
        audited += 1;
    }
    // The probe needs enough questions for its cross-validation; with too few the audit leaves it out.
    let value = |setting: &str, task: &str, pointer: &str| -> anyhow::Result<Option<f64>> {
        let file = format!("audit/{setting}/{task}/audit.json");
        if !Path::new(&file).is_file() {
            return Ok(None);
        }
        Ok(json(&file)?.pointer(pointer).and_then(Value::as_f64))
    };
    let knob_settings: Vec<String> = counts.keys().map(|(s, _)| s.clone()).filter(|s| s != "recipeqa").collect();
    let mut parts = Vec::new();
    for task in ["visual_cloze", "visual_coherence"] {
        for (name, pointer) in [
            ("Hasty Student", "/tasks/0/hasty_student/value"),
            ("distance probe", "/tasks/0/distance_probe/accuracy/value"),
        ] {
            // RecipeQA mode's value with its interval and count; the knob settings' as their range (each with its
            // interval is in the audit and the report).
            let rq_file = format!("audit/recipeqa/{task}/audit.json");
            let rq = if Path::new(&rq_file).is_file() {
                let j = json(&rq_file)?;
                let estimate = pointer.strip_suffix("/value").unwrap_or(pointer);
                match (pct_at(&j, estimate), j.pointer("/tasks/0/questions").and_then(Value::as_u64)) {
                    (Some(x), Some(n)) => format!("{x} ({n} questions)"),
                    _ => "–".into(),
                }
            } else {
                "–".into()
            };
            let mut knobs = Vec::new();
            for s in &knob_settings {
                knobs.extend(value(s, task, pointer)?);
            }
            let range = match (knobs.iter().copied().reduce(f64::min), knobs.iter().copied().reduce(f64::max)) {
                (Some(lo), Some(hi)) => format!("{}–{}", pct(lo), pct(hi)),
                _ => "–".into(),
            };
            parts.push(format!("{task} {name} {rq} in RecipeQA mode, {range} in the knob settings"));
        }
    }
    // The shortcut panel's verdict over the knob settings (calibrated knobs, the default): how many are
    // shortcut-free, and the worst shortcut left.
    let (mut judged, mut free, mut worst): (usize, usize, Option<(f64, String)>) = (0, 0, None);
    for ((setting, task), n) in &counts {
        if *n == 0 || setting == "recipeqa" {
            continue;
        }
        let file = format!("audit/{setting}/{task}/audit.json");
        if !Path::new(&file).is_file() {
            continue;
        }
        let j = json(&file)?;
        let Some(verdict) = j.pointer("/tasks/0/shortcuts/shortcut_free").and_then(Value::as_bool) else { continue };
        judged += 1;
        free += usize::from(verdict);
        let w = j.pointer("/tasks/0/shortcuts/worst");
        let chance = j.pointer("/tasks/0/chance").and_then(Value::as_f64).unwrap_or(0.25);
        if let (Some(name), Some(v)) = (
            w.and_then(|w| w.pointer("/name")).and_then(Value::as_str),
            w.and_then(|w| w.pointer("/accuracy/value")).and_then(Value::as_f64),
        ) && worst.as_ref().is_none_or(|(d, _)| (v - chance).abs() > *d)
        {
            let ci = w
                .and_then(|w| w.pointer("/accuracy/ci"))
                .and_then(|c| Some((c.get("low")?.as_f64()?, c.get("high")?.as_f64()?)))
                .map_or(String::new(), |(lo, hi)| format!(" [{}, {}]", pct(lo), pct(hi)));
            worst = Some(((v - chance).abs(), format!("{task} {setting}: {name} {}{ci}", pct(v))));
        }
    }
    if judged > 0 {
        parts.push(format!(
            "shortcut-free (shortcut panel) in {free} of {judged} knob task sets{}",
            worst.map_or(String::new(), |(_, w)| format!(", worst {w}"))
        ));
    }
    let mut s = format!("{audited} task sets audited (chance 25%): {}", parts.join("; "));
    if !empty.is_empty() {
        s.push_str(&format!("; empty, not audited: {}", empty.join(", ")));
    }
    Ok(s)
}
