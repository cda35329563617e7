//! The audit as Markdown (the JSON is the report serialised), and one line per task for the terminal.

use stepwise_score::bootstrap::Estimate;
use stepwise_score::markdown::{number, percent, percent_estimate};

use stepwise_core::{Task, TaskShape};

use super::shortcuts::ShortcutPanel;
use super::suite::entry_text;
use super::{AuditReport, TaskAudit};

fn pct(e: Option<Estimate>) -> String {
    match e {
        Some(e) => percent_estimate(&e),
        None => "–".into(),
    }
}

/// The plot files a report links to, as (task, relative path) pairs.
#[derive(Debug, Clone, Default)]
pub struct PlotLinks {
    /// Distances of correct and incorrect choices.
    pub distances: Vec<(Task, String)>,
    /// The answer's distance-rank histogram (shortcut panel).
    pub ranks: Vec<(Task, String)>,
}

fn link(plots: &[(Task, String)], task: Task) -> Option<String> {
    plots.iter().find(|(t, _)| *t == task).map(|(_, p)| format!("[{p}]({p})"))
}

/// Render `r`; `source` names the audited task set, `plots` the plot files per task.
pub fn markdown(r: &AuditReport, source: &str, plots: &PlotLinks) -> String {
    let mut out = format!("# Bias audit of {source}\n\n");
    out.push_str(&format!(
        "{} questions. Accuracies in %, with {:.0}% percentile-bootstrap intervals ({} resamples over procedures). \
         Chance is 1 / number of choices.\n\n",
        r.questions,
        100.0 * r.config.bootstrap.confidence,
        r.config.bootstrap.resamples
    ));
    if !r.warnings.is_empty() {
        out.push_str("## Warnings\n\n");
        for w in &r.warnings {
            out.push_str(&format!("- {w}\n"));
        }
        out.push('\n');
    }
    out.push_str("## Answering without reading\n\n");
    out.push_str(
        "| task | questions | with vectors | chance | Hasty Student | distance probe | answer is the extreme choice |\n\
         |---|---:|---:|---:|---|---|---:|\n",
    );
    for t in &r.tasks {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            t.task,
            t.questions,
            t.with_vectors,
            percent(t.chance),
            pct(t.hasty_student),
            pct(t.distance_probe.as_ref().map(|p| p.accuracy)),
            t.distances.as_ref().map_or("–".into(), |d| percent(d.answer_is_extreme)),
        ));
    }
    out.push_str(
        "\nHasty Student (RecipeQA §4.2): cloze — the choice most similar (cosine) to the question items; \
         coherence — the item least similar to the others; ordering — the ordering with the smallest mean distance \
         between consecutive images. Distance probe (Meta-RecipeQA fig. 2): logistic regression on each choice's \
         distance to the question, cross-validated with folds grouped by question. \"Extreme choice\": the nearest \
         choice to the question (cloze, ordering) or the item farthest from the others (coherence).\n",
    );
    for t in &r.tasks {
        if let Some(why) = &t.vectors_unavailable {
            out.push_str(&format!("\n- {}: vector-based measures unavailable: {why}.\n", t.task));
        } else if t.with_vectors < t.questions {
            out.push_str(&format!(
                "\n- {}: {} of {} questions lack vectors for some item (e.g. {}); they are left out of the \
                 vector-based measures.\n",
                t.task,
                t.questions - t.with_vectors,
                t.questions,
                t.missing_examples.first().map_or("–", String::as_str)
            ));
        }
    }

    shortcut_section(&mut out, r, plots);

    out.push_str("\n## Distances of correct and incorrect choices\n\n| task | distance | correct (mean) | incorrect (mean) | plot |\n|---|---|---:|---:|---|\n");
    for t in &r.tasks {
        if let Some(d) = &t.distances {
            let plot = link(&plots.distances, t.task).unwrap_or_else(|| "–".to_string());
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                t.task,
                d.definition,
                number(d.correct_mean, 4),
                number(d.incorrect_mean, 4),
                plot
            ));
        }
    }

    out.push_str(
        "\n## Question overlap (Meta-RecipeQA bias 1)\n\nShare of questions whose answer step is revealed by another \
         question of the same procedure: in the same task, in any task of the file, and in a *later* question of the \
         same task (file order; knob 1 makes this zero — an earlier question may still show a step that a later \
         one asks for). Provenance: stepwise `meta`, else the RecipeQA qid pattern.\n\n| task | applicable | \
         same task | any task | later question, same task | provenance |\n|---|---:|---|---|---|---|\n",
    );
    for t in &r.tasks {
        let prov: Vec<String> = t.overlap.provenance.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let na = t.task.shape() == TaskShape::Ordering;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            t.task,
            if na { "n/a (no answer step)".to_string() } else { t.overlap.applicable.to_string() },
            pct(t.overlap.same_task),
            pct(t.overlap.any_task),
            pct(t.overlap.later_same_task),
            prov.join(", ")
        ));
    }

    out.push_str(
        "\n## Answer positions and choice lengths\n\n| task | answers per position | χ² (p) | always the majority \
         position | longest choice | shortest choice |\n|---|---|---|---|---|---|\n",
    );
    for t in &r.tasks {
        let (counts, chi) = match &t.answer_positions {
            Some(b) => (
                b.counts.iter().map(u64::to_string).collect::<Vec<_>>().join(" / "),
                format!("{} (p = {})", number(b.chi2, 2), number(b.p_value, 4)),
            ),
            None => ("–".into(), "–".into()),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            t.task,
            counts,
            chi,
            pct(t.majority_position),
            pct(t.longest_choice),
            pct(t.shortest_choice)
        ));
    }
    out
}

/// The verdict's confidence per task, "99.2% (textual_cloze, visual_cloze), 99.3% (visual_ordering)".
fn verdict_levels(tasks: &[&TaskAudit]) -> String {
    let mut levels: Vec<(String, Vec<String>)> = Vec::new();
    for t in tasks {
        let Some(p) = &t.shortcuts else { continue };
        let level = format!("{:.1}%", 100.0 * p.verdict_confidence);
        match levels.iter_mut().find(|(l, _)| *l == level) {
            Some((_, names)) => names.push(t.task.to_string()),
            None => levels.push((level, vec![t.task.to_string()])),
        }
    }
    levels.iter().map(|(l, names)| format!("{l} ({})", names.join(", "))).collect::<Vec<_>>().join(", ")
}

/// "## Shortcut panel": one row per (task, shortcut), then each task's verdict and answer-rank histogram.
fn shortcut_section(out: &mut String, r: &AuditReport, plots: &PlotLinks) {
    let tasks: Vec<&TaskAudit> = r.tasks.iter().filter(|t| t.shortcuts.is_some()).collect();
    if tasks.is_empty() {
        return;
    }
    out.push_str(&format!(
        "\n## Shortcut panel\n\n| task | shortcut | accuracy ({:.0}% CI) | questions |\n|---|---|---|---:|\n",
        100.0 * r.config.bootstrap.confidence
    ));
    for t in &tasks {
        let Some(p) = &t.shortcuts else { continue };
        for e in &p.entries {
            out.push_str(&format!("| {} | {} | {} | {} |\n", t.task, e.name, pct(Some(e.accuracy)), e.questions));
        }
    }
    out.push_str(&format!(
        "\nRank k: always pick the choice whose distance d (as in the table of distances below) is the k-th \
         smallest (ties: the lower position first); together the rank picks are the histogram of the \
         answer's distance rank, flat for a set without a distance cue. Distance + rank probe: the distance probe \
         with the choice's rank as a one-hot; choice-only probe: the same model on each choice's relation to the \
         other choices only, never the question (it catches an answer that looks different from the negatives; \
         for coherence the choices are the question). Not one of a reversed pair (ordering): pick at random among \
         the choices whose reverse is not shown. Rank given spread and level: the answer rank most common, on the \
         other half of the procedures, among questions whose distances are as spread out and as far (a 5 × 5 grid \
         of their quintiles). Both probes are fitted on the questions of half of the \
         procedures and scored on the other half's (their question counts). A task is **shortcut-free** when every \
         entry's interval at the table's {:.0}% Bonferroni-corrected over the task's entries ({} each; so that a \
         set without any shortcut passes at least {:.0}% of the time) contains chance and no entry lies more than \
         {:.0} points above it.\n\n",
        100.0 * r.config.bootstrap.confidence,
        verdict_levels(&tasks),
        100.0 * r.config.bootstrap.confidence,
        100.0 * super::shortcuts::MARGIN,
    ));
    for t in &tasks {
        let Some(p) = &t.shortcuts else { continue };
        let verdict = match (p.shortcut_free, &p.worst) {
            (Some(true), _) => format!("**{}: shortcut-free**", t.task),
            (Some(false), Some(w)) => format!(
                "**{}: not shortcut-free — worst: {} {} (chance {})**",
                t.task,
                w.name,
                pct(Some(w.accuracy)),
                percent(p.chance)
            ),
            (Some(false), None) => format!("**{}: not shortcut-free**", t.task),
            (None, _) => format!(
                "**{}: undetermined** ({})",
                t.task,
                p.undetermined.as_deref().unwrap_or("the verdict could not be judged")
            ),
        };
        let counts: Vec<String> = p.answer_rank_counts.iter().map(u64::to_string).collect();
        let plot = link(&plots.ranks, t.task).map_or(String::new(), |l| format!(" ({l})"));
        out.push_str(&format!(
            "- {verdict}; answer's distance rank 1..{} (smallest d first): {}{plot}",
            p.choices,
            counts.join(" / ")
        ));
        if p.left_out > 0 {
            out.push_str(&format!("; {} questions with another number of choices left out", p.left_out));
        }
        out.push('\n');
    }
}

/// One task's audit in a line (the audit's summary on the terminal): questions, Hasty Student, distance probe and
/// the shortcut panel's verdict.
pub fn summary_line(t: &TaskAudit) -> String {
    let value = |e: Option<Estimate>| e.map_or("–".to_string(), |e| format!("{:.1}%", 100.0 * e.value));
    let verdict = |p: &ShortcutPanel| match (p.shortcut_free, &p.worst) {
        (Some(true), _) => "shortcut-free".to_string(),
        (Some(false), Some(w)) => format!("not shortcut-free (worst: {})", entry_text(w)),
        (Some(false), None) => "not shortcut-free".into(),
        (None, _) => "shortcut-freedom undetermined".into(),
    };
    format!(
        "{:<17} {:>5} questions ({} with vectors): Hasty Student {}, distance probe {}{}",
        t.task,
        t.questions,
        t.with_vectors,
        value(t.hasty_student),
        value(t.distance_probe.as_ref().map(|p| p.accuracy)),
        t.shortcuts.as_ref().map_or(String::new(), |p| format!(", {}", verdict(p)))
    )
}
