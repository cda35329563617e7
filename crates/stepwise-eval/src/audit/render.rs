//! The audit as Markdown (the JSON is the report serialised).

use crate::bootstrap::Estimate;
use crate::markdown::{number, percent, percent_interval};

use super::AuditReport;

fn pct(e: Option<Estimate>) -> String {
    match e {
        Some(e) => format!("{} {}", percent(e.value), percent_interval(e.ci)),
        None => "–".into(),
    }
}

/// Render `r`; `source` names the audited task set, `plots` the histogram files (relative paths) per task.
pub fn markdown(r: &AuditReport, source: &str, plots: &[(String, String)]) -> String {
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

    out.push_str("\n## Distances of correct and incorrect choices\n\n| task | distance | correct (mean) | incorrect (mean) | plot |\n|---|---|---:|---:|---|\n");
    for t in &r.tasks {
        if let Some(d) = &t.distances {
            let plot = plots
                .iter()
                .find(|(task, _)| *task == t.task)
                .map_or("–".to_string(), |(_, p)| format!("[{p}]({p})"));
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
        let na = t.task == "visual_ordering";
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
