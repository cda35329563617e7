//! Why procedures, steps and questions were left out, and the counts a generation run reports.
//!
//! Constraints are never relaxed: a question whose constraint cannot be met is skipped and counted here by
//! reason, so a suite's counts table says exactly what each setting cost. Knob settings sharing k1 ask the same
//! questions: a question dropped because one of them cannot meet its constraint is counted under that reason in
//! that setting and as [`SkipReason::PairedSettingFailed`] in the others.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Why a procedure, a step or a question attempt was not used. The `as_str` names are stable (they are keys of
/// manifests and counts tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    // --- procedures
    /// Fewer than `min_steps` or more than `max_steps` steps (RecipeQA §3: 3–25).
    StepCountOutOfRange,
    /// Fewer eligible steps than items per question.
    TooFewEligibleSteps,
    /// Knob 1: fewer than `knob1_min_steps` eligible steps (Meta-RecipeQA: 5).
    Knob1TooFewSteps,
    // --- steps
    /// The first step (narrative introduction) is not a question item.
    FirstStep,
    /// No title (after removing step numbers) / no text / no image, depending on the task.
    NoItem,
    /// The same title or image as an earlier step of the procedure: a question would show it twice.
    RepeatedItem,
    /// The features have no vector for the step's item (only with `--allow-missing-features`).
    MissingFeatures,
    // --- question attempts
    /// Knob 1: the pool of steps ran out before the procedure's question budget.
    Knob1PoolExhausted,
    /// RecipeQA mode: fewer candidates than negatives needed after the adaptive neighbourhood.
    TooFewCandidates,
    /// Knob 2: fewer candidates than negatives needed in the ball (setting 0) or shell (setting 1).
    Knob2RegionTooSmall,
    /// Knob 3: no (or too few) candidates as close to the question as the answer.
    Knob3NoCloseNegative,
    /// Ordering: fewer distinct wrong orders than negatives needed.
    TooFewOrderings,
    /// Knob settings: this setting could make the question, but another setting sharing its k1 (same task)
    /// could not, so the question is left out of all of them (the settings stay paired).
    PairedSettingFailed,
    /// Calibrated knobs: the candidates cannot put the answer at any distance rank among the choices (e.g. no
    /// candidate lies on one side of the answer's distance to the question and the other side has too few).
    CalibratedRankUnreachable,
    /// Calibrated knobs: left out because every draw it tried would unbalance what the shortcuts read (its answer
    /// stands apart from every candidate the knobs allow; see [`crate::calibrated::Balance`]).
    CalibratedBalance,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::StepCountOutOfRange => "step_count_out_of_range",
            SkipReason::TooFewEligibleSteps => "too_few_eligible_steps",
            SkipReason::Knob1TooFewSteps => "knob1_too_few_steps",
            SkipReason::FirstStep => "first_step",
            SkipReason::NoItem => "no_item",
            SkipReason::RepeatedItem => "repeated_item",
            SkipReason::MissingFeatures => "missing_features",
            SkipReason::Knob1PoolExhausted => "knob1_pool_exhausted",
            SkipReason::TooFewCandidates => "too_few_candidates",
            SkipReason::Knob2RegionTooSmall => "knob2_region_too_small",
            SkipReason::Knob3NoCloseNegative => "knob3_no_close_negative",
            SkipReason::TooFewOrderings => "too_few_orderings",
            SkipReason::PairedSettingFailed => "paired_setting_failed",
            SkipReason::CalibratedRankUnreachable => "calibrated_rank_unreachable",
            SkipReason::CalibratedBalance => "calibrated_balance",
        }
    }
}

impl SkipReason {
    /// The reason from its stable name.
    pub fn from_name(name: &str) -> Option<SkipReason> {
        ALL_REASONS.iter().copied().find(|r| r.as_str() == name)
    }

    /// What a user can change when this reason leaves out most of a result (generate's options).
    pub fn remedy(self) -> &'static str {
        match self {
            SkipReason::StepCountOutOfRange => "change --min-steps / --max-steps",
            SkipReason::TooFewEligibleSteps => {
                "a procedure needs at least --items usable steps (a title for textual cloze, an image for the \
                 visual tasks; the first step only with --keep-first-step): lower --items or pass \
                 --keep-first-step"
            }
            SkipReason::Knob1TooFewSteps => "lower --knob1-min-steps",
            SkipReason::FirstStep => "pass --keep-first-step",
            SkipReason::NoItem => "the steps lack the item the task shows (titles, texts or images)",
            SkipReason::RepeatedItem => "the procedures repeat titles or images",
            SkipReason::MissingFeatures => "embed the missing items (see the store's failures.jsonl)",
            SkipReason::Knob1PoolExhausted => "a larger corpus gives each procedure more questions",
            SkipReason::PairedSettingFailed => {
                "settings with the same k1 ask the same questions, so a question another of them cannot make is \
                 dropped here too: see that setting's reason"
            }
            SkipReason::TooFewCandidates
            | SkipReason::Knob2RegionTooSmall
            | SkipReason::Knob3NoCloseNegative
            | SkipReason::TooFewOrderings => {
                "distractors are scarce: raise --k, add --distractor-pool, or use a larger corpus"
            }
            SkipReason::CalibratedRankUnreachable => {
                "the answer is closer to (or farther from) the question than the candidates reach: raise --k, add \
                 --distractor-pool, or use a larger corpus (--knobs-mode paper keeps these questions, shortcut and all)"
            }
            SkipReason::CalibratedBalance => {
                "these answers stand apart from every negative the knobs allow (nearer the question than any, or \
                 unlike the other choices), so keeping them would bring a shortcut back; a larger corpus or \
                 --distractor-pool gives more candidates like them (--knobs-mode paper keeps them, shortcut and all)"
            }
        }
    }
}

pub(crate) const ALL_REASONS: [SkipReason; 15] = [
    SkipReason::StepCountOutOfRange,
    SkipReason::TooFewEligibleSteps,
    SkipReason::Knob1TooFewSteps,
    SkipReason::FirstStep,
    SkipReason::NoItem,
    SkipReason::RepeatedItem,
    SkipReason::MissingFeatures,
    SkipReason::Knob1PoolExhausted,
    SkipReason::TooFewCandidates,
    SkipReason::Knob2RegionTooSmall,
    SkipReason::Knob3NoCloseNegative,
    SkipReason::TooFewOrderings,
    SkipReason::PairedSettingFailed,
    SkipReason::CalibratedRankUnreachable,
    SkipReason::CalibratedBalance,
];

/// A task set with fewer questions than this gives accuracies too uncertain to compare: at 50% accuracy the 95%
/// interval of 50 questions spans about ±14 points.
pub const FEW_QUESTIONS: u64 = 50;

/// A setting that keeps less than this share of its planned questions is reported by name: its questions are a
/// selection of the plan's (the ones a constraint could serve), not the plan.
pub const MIN_RETENTION: f64 = 0.5;

/// What one generation run (one task, one mode) produced and left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub questions: u64,
    /// Questions per split (`train`, `val`, `test`).
    pub questions_by_split: BTreeMap<String, u64>,
    /// Procedures in the corpus.
    pub procedures: u64,
    /// Procedures with at least one question.
    pub procedures_used: u64,
    /// Procedures not used at all, by reason.
    pub procedures_skipped: BTreeMap<String, u64>,
    /// Steps that could not be question items, by reason (over procedures that passed the step-count filter).
    pub steps_excluded: BTreeMap<String, u64>,
    /// Question attempts that were skipped, by reason.
    pub questions_skipped: BTreeMap<String, u64>,
    /// Knob settings: questions whose constraint could not be met among the K searched neighbours and whose
    /// negatives come from the widened search (the whole catalog within the region's reach).
    #[serde(default)]
    pub questions_widened: u64,
}

impl Counts {
    pub fn skip_procedure(&mut self, r: SkipReason) {
        *self.procedures_skipped.entry(r.as_str().to_string()).or_insert(0) += 1;
    }

    pub fn exclude_steps(&mut self, r: SkipReason, n: u64) {
        if n > 0 {
            *self.steps_excluded.entry(r.as_str().to_string()).or_insert(0) += n;
        }
    }

    pub fn skip_questions(&mut self, r: SkipReason, n: u64) {
        if n > 0 {
            *self.questions_skipped.entry(r.as_str().to_string()).or_insert(0) += n;
        }
    }

    /// Total skipped question attempts.
    pub fn questions_skipped_total(&self) -> u64 {
        self.questions_skipped.values().sum()
    }

    /// Add another run's counts (procedures are summed too: use it to merge disjoint parts).
    pub fn merge(&mut self, o: &Counts) {
        self.questions += o.questions;
        self.procedures += o.procedures;
        self.procedures_used += o.procedures_used;
        self.questions_widened += o.questions_widened;
        for (dst, src) in [
            (&mut self.questions_by_split, &o.questions_by_split),
            (&mut self.procedures_skipped, &o.procedures_skipped),
            (&mut self.steps_excluded, &o.steps_excluded),
            (&mut self.questions_skipped, &o.questions_skipped),
        ] {
            for (k, v) in src {
                *dst.entry(k.clone()).or_insert(0) += v;
            }
        }
    }

    /// The questions the plan asked for (kept or skipped by a constraint; not those knob 1's pool ran out of).
    pub fn planned(&self) -> u64 {
        let exhausted = self.questions_skipped.get(SkipReason::Knob1PoolExhausted.as_str()).copied().unwrap_or(0);
        self.questions + self.questions_skipped_total() - exhausted
    }

    /// Share of the planned questions kept; `None` when none were planned.
    pub fn retention(&self) -> Option<f64> {
        let planned = self.planned();
        (planned > 0).then(|| self.questions as f64 / planned as f64)
    }

    /// Warnings about this result (to be prefixed with what it is, e.g. "visual_cloze knobs-1-0-1: "): too few
    /// questions, too little of the plan kept, or most procedures giving none; each names the main reason and
    /// what to change.
    pub fn warnings(&self) -> Vec<String> {
        let top = |m: &BTreeMap<String, u64>| {
            m.iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .and_then(|(k, v)| SkipReason::from_name(k).map(|r| format!("{k}: {v}; {}", r.remedy())))
        };
        let mut out = Vec::new();
        let skipped: u64 = self.procedures_skipped.values().sum();
        if self.procedures > 0 && 2 * skipped > self.procedures {
            out.push(format!(
                "{skipped} of {} procedures were left out{}",
                self.procedures,
                top(&self.procedures_skipped).map_or(String::new(), |t| format!(" ({t})"))
            ));
        }
        if let Some(kept) = self.retention().filter(|&k| k < MIN_RETENTION) {
            out.push(format!(
                "keeps {:.1}% of its {} planned questions, below the {:.0}% a setting should keep{}",
                100.0 * kept,
                self.planned(),
                100.0 * MIN_RETENTION,
                top(&self.questions_skipped).map_or(String::new(), |t| format!(" (most dropped for {t})"))
            ));
        }
        if self.questions < FEW_QUESTIONS {
            let why = match top(&self.questions_skipped) {
                Some(t) if self.questions_skipped_total() > self.questions => format!("; most attempts failed ({t})"),
                _ => String::new(),
            };
            out.push(format!(
                "only {} questions, too few to compare accuracies (a 95% interval at {FEW_QUESTIONS} \
                 questions already spans about ±14 points){why}",
                self.questions
            ));
        }
        out
    }

    /// The counts as manifest entries (`questions`, `procedures_used`, `skipped.<reason>`, ...).
    pub fn manifest_entries(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        m.insert("questions".to_string(), self.questions);
        m.insert("procedures".to_string(), self.procedures);
        m.insert("procedures_used".to_string(), self.procedures_used);
        m.insert("questions_widened".to_string(), self.questions_widened);
        for (k, v) in &self.questions_by_split {
            m.insert(format!("questions.{k}"), *v);
        }
        for (k, v) in &self.procedures_skipped {
            m.insert(format!("procedures_skipped.{k}"), *v);
        }
        for (k, v) in &self.steps_excluded {
            m.insert(format!("steps_excluded.{k}"), *v);
        }
        for (k, v) in &self.questions_skipped {
            m.insert(format!("questions_skipped.{k}"), *v);
        }
        m
    }
}
