//! What to generate: the task, the mode (RecipeQA's recipe or a Meta-RecipeQA knob setting) and every numeric
//! parameter of the recipes, with the papers' values as defaults where the papers state them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use stepwise_core::{Task, TaskShape};
use stepwise_features::Metric;

/// A Meta-RecipeQA control-knob setting (k1, k2, k3) ∈ {0,1}³ (Meta-RecipeQA §3.2, appendix B).
///
/// - k1 (question overlap): 0 → at most ⌊n/2⌋ questions per procedure; 1 → at most ⌊n/3⌋ and one further random
///   step removed from the pool after each question.
/// - k2 (hard negatives): 0 → negatives from the ball (0, m_d − s_d) around the answer (harder); 1 → from the
///   shell [m_d − s_d, m_d + s_d]. Ordering: 0 → wrong orders uniform; 1 → weighted by their summed distance.
/// - k3 (negatives near the question): 1 → some negatives must be at least as close to the question as the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KnobSetting {
    pub k1: u8,
    pub k2: u8,
    pub k3: u8,
}

impl KnobSetting {
    /// All eight settings in lexicographic order (0,0,0) … (1,1,1).
    pub fn all() -> Vec<KnobSetting> {
        (0..8u8).map(|i| KnobSetting { k1: (i >> 2) & 1, k2: (i >> 1) & 1, k3: i & 1 }).collect()
    }
}

impl fmt::Display for KnobSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{}", self.k1, self.k2, self.k3)
    }
}

impl FromStr for KnobSetting {
    type Err = String;

    /// Parse `a,b,c` (also `(a,b,c)` or `a-b-c`) with each of a, b, c in {0, 1}.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().trim_start_matches('(').trim_end_matches(')');
        let parts: Vec<&str> = t.split([',', '-']).map(str::trim).collect();
        let bit = |p: &str| match p {
            "0" => Ok(0u8),
            "1" => Ok(1u8),
            other => Err(format!("knob setting {s:?}: {other:?} is not 0 or 1")),
        };
        if parts.len() != 3 {
            return Err(format!("knob setting {s:?}: expected three values like 0,1,1"));
        }
        Ok(KnobSetting { k1: bit(parts[0])?, k2: bit(parts[1])?, k3: bit(parts[2])? })
    }
}

/// How questions are made: RecipeQA's original recipe, or Meta-RecipeQA's knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Mode {
    RecipeQa,
    Knobs(KnobSetting),
}

impl Mode {
    /// The nine datasets of a suite: RecipeQA mode, then the eight knob settings.
    pub fn suite() -> Vec<Mode> {
        std::iter::once(Mode::RecipeQa).chain(KnobSetting::all().into_iter().map(Mode::Knobs)).collect()
    }

    /// A file-name-safe label: `recipeqa` or `knobs-0-1-1`.
    pub fn label(&self) -> String {
        match self {
            Mode::RecipeQa => "recipeqa".to_string(),
            Mode::Knobs(k) => format!("knobs-{}-{}-{}", k.k1, k.k2, k.k3),
        }
    }

    pub fn parse_label(s: &str) -> Option<Mode> {
        if s == "recipeqa" {
            return Some(Mode::RecipeQa);
        }
        s.strip_prefix("knobs-").and_then(|k| k.parse().ok()).map(Mode::Knobs)
    }

    /// The setting whose questions of `task` this setting has: itself, except for visual ordering, which has no
    /// knob 3 (Meta-RecipeQA appendix B) — its k3 = 1 settings are the k3 = 0 ones, and a suite writes one
    /// ordering task set per (k1, k2).
    pub fn data_mode(self, task: Task) -> Mode {
        match self {
            Mode::Knobs(k) if task.shape() == TaskShape::Ordering => Mode::Knobs(KnobSetting { k3: 0, ..k }),
            m => m,
        }
    }

    /// The settings whose questions of `task` are made together with this one's: for a knob setting, every
    /// setting with the same k1 (the four (k2, k3); for ordering the two k2), which ask the same questions —
    /// same qids, question items and answers — and differ only in their negatives; RecipeQA mode alone.
    pub fn paired(self, task: Task) -> Vec<Mode> {
        match self {
            Mode::RecipeQa => vec![Mode::RecipeQa],
            Mode::Knobs(k) => {
                let k3s: &[u8] = if task.shape() == TaskShape::Ordering { &[0] } else { &[0, 1] };
                let mut out = Vec::with_capacity(4);
                for k2 in 0..2u8 {
                    for &k3 in k3s {
                        out.push(Mode::Knobs(KnobSetting { k1: k.k1, k2, k3 }));
                    }
                }
                out
            }
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// How a suite's knob settings choose negatives (Meta-RecipeQA knobs 2 and 3; knob 1 is the same in both).
///
/// - `Paper`: the papers' rules as written, with knob 3 as the paper's implementation applied it (§4.4): a
///   coin flip per question decides whether one negative must be at least as close to the question as the
///   answer. They reproduce the paper, shortcuts included.
/// - `Calibrated`: knob 2's ball or shell around the answer as in the paper, but the negatives are drawn so
///   that the answer's distance rank to the question among the choices is uniform over positions (a target
///   rank drawn per question, then negatives from the bands of question distance that realise it), so that
///   "pick the nearest" and its mirror image both sit at chance. Knob 3 sets how close those bands are to the
///   answer's own question distance: k3 = 1 takes the negatives nearest to it (as close to the question as the
///   answer), k3 = 0 any of each band. Visual coherence does the same for the odd-one-out's rank; visual
///   ordering draws wrong orders around the correct order's chain length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum KnobsMode {
    Paper,
    #[default]
    Calibrated,
}

impl KnobsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            KnobsMode::Paper => "paper",
            KnobsMode::Calibrated => "calibrated",
        }
    }

    /// Manifests written before the mode existed made knob settings the paper's way.
    pub fn before_modes() -> Self {
        KnobsMode::Paper
    }
}

impl fmt::Display for KnobsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for KnobsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "paper" => Ok(KnobsMode::Paper),
            "calibrated" => Ok(KnobsMode::Calibrated),
            other => Err(format!("knobs mode {other:?}: expected `paper` or `calibrated`")),
        }
    }
}

/// Which text of a step the textual cloze hides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClozeField {
    /// The step title (RecipeQA), with step numbers removed. Feature ids `title:{procedure}#{step}`.
    #[default]
    Title,
    /// The step's full text. Feature ids `text:{procedure}#{step}`.
    Text,
}

impl FromStr for ClozeField {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "title" => Ok(ClozeField::Title),
            "text" => Ok(ClozeField::Text),
            other => Err(format!("cloze field {other:?}: expected `title` or `text`")),
        }
    }
}

/// How many questions RecipeQA mode draws per procedure and task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionsPerProcedure {
    /// max(1, ⌊n/4⌋) for n eligible steps. RecipeQA does not state its rule; this reproduces the shape of the
    /// released val questions (most recipes one question per task, longer recipes a few).
    Auto,
    Fixed(usize),
}

impl QuestionsPerProcedure {
    pub fn count(self, eligible: usize) -> usize {
        match self {
            QuestionsPerProcedure::Auto => (eligible / 4).max(1),
            QuestionsPerProcedure::Fixed(n) => n,
        }
    }
}

/// Every parameter of question generation. `Default` gives the papers' values where they state one; the others
/// are documented on their field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerateConfig {
    pub seed: u64,
    /// N_Q: items shown in a question (RecipeQA: 4).
    pub n_items: usize,
    /// Choices per question, one correct (RecipeQA: 4).
    pub n_choices: usize,
    /// k nearest neighbours searched for distractors (RecipeQA §3: k = 100; Meta-RecipeQA's K).
    pub k: usize,
    /// K_C (cloze): how many of the K neighbours (the nearest ones) give m_d and s_d; the knob-2 pool is every
    /// searched candidate inside the ball or shell they define. Meta-RecipeQA appendix B names K_C without a
    /// recoverable value: the default 50 (K/2) is this implementation's choice, not the paper's. Coherence takes
    /// m_d and s_d over the whole union of the coherent images' neighbour lists (appendix B.1) and ignores K_C.
    pub k_c: usize,
    /// Adaptive-neighbourhood margin (RecipeQA §3): candidates closer to the answer than `margin × d_min`
    /// (d_min: the closest candidate's distance) are dropped as near-duplicates before sampling. RecipeQA does
    /// not give its value: the default 1.2 is this implementation's choice.
    pub margin: f64,
    /// Procedures with fewer or more steps are not used (RecipeQA §3: 3–25).
    pub min_steps: usize,
    pub max_steps: usize,
    /// The first step of a procedure is a narrative introduction in RecipeQA's instructables and is never a
    /// question item (RecipeQA §3); it still serves as a distractor for other procedures.
    pub skip_first_step: bool,
    /// Knob 1 uses only procedures with at least this many eligible steps (Meta-RecipeQA: 5).
    pub knob1_min_steps: usize,
    /// Knob 3 (setting 1): how many negatives must be at least as close to the question as the answer. The
    /// paper uses one and notes that this is a weak constraint.
    pub n_constrained: usize,
    pub recipeqa_questions: QuestionsPerProcedure,
    pub cloze_field: ClozeField,
    /// Distance used for neighbours, knobs and provenance (lower is closer). Both papers define the knobs with
    /// Euclidean distances between image features (RecipeQA: on ResNet-50 pool5), so the default is L2; cosine
    /// and inner product are options.
    pub metric: Metric,
    /// Candidates at most this far from the answer are treated as the same content and never used.
    pub duplicate_epsilon: f64,
    /// How neighbours are found.
    pub neighbors: NeighborSearch,
    /// How knob settings choose negatives ([`KnobsMode`]); RecipeQA mode ignores it.
    #[serde(default = "KnobsMode::before_modes")]
    pub knobs_mode: KnobsMode,
}

/// Exact neighbours, or an approximate index (IVF or HNSW) for catalogs where exact search is too slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NeighborSearch {
    /// Exact when (query items × catalog items) ≤ `EXACT_PAIR_LIMIT`, else IVF with the default probes.
    Auto,
    Exact,
    /// Inverted file ([`crate::ivf`]): k-means lists (⌈√n⌉), each query scans its `probes` nearest lists
    /// exactly. Reproducible for any thread count.
    Ivf {
        probes: usize,
    },
    /// HNSW (usearch through `stepwise_features::ann`), built on one thread in catalog order so the graph and
    /// the answers are reproducible; `ef` is the search-time candidate list size (recall grows with it).
    Hnsw {
        ef: usize,
    },
}

impl NeighborSearch {
    /// Above this many query–item pairs, `Auto` switches to IVF (exact search of that many pairs at a few
    /// hundred dimensions takes tens of seconds on 2 cores).
    pub const EXACT_PAIR_LIMIT: u64 = 2_000_000_000;
    pub const DEFAULT_EF: usize = 256;
    /// Chosen for recall against exact search per scan time on the 20,000-procedure world (docs/performance.md).
    pub const DEFAULT_PROBES: usize = 8;

    /// The method `Auto` resolves to for `queries` query items over `items` catalog items.
    pub fn resolve(self, queries: usize, items: usize) -> NeighborSearch {
        match self {
            NeighborSearch::Auto if queries as u64 * items as u64 > Self::EXACT_PAIR_LIMIT => {
                NeighborSearch::Ivf { probes: Self::DEFAULT_PROBES }
            }
            NeighborSearch::Auto => NeighborSearch::Exact,
            other => other,
        }
    }
}

impl FromStr for NeighborSearch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(NeighborSearch::Auto),
            "exact" => Ok(NeighborSearch::Exact),
            "hnsw" => Ok(NeighborSearch::Hnsw { ef: NeighborSearch::DEFAULT_EF }),
            "ivf" => Ok(NeighborSearch::Ivf { probes: NeighborSearch::DEFAULT_PROBES }),
            other => {
                let bad =
                    || format!("neighbour search {other:?}: expected auto, exact, ivf, ivf:PROBES, hnsw or hnsw:EF");
                if let Some(x) = other.strip_prefix("hnsw:") {
                    match x.parse::<usize>() {
                        Ok(ef) if ef > 0 => Ok(NeighborSearch::Hnsw { ef }),
                        _ => Err(bad()),
                    }
                } else if let Some(x) = other.strip_prefix("ivf:") {
                    match x.parse::<usize>() {
                        Ok(probes) if probes > 0 => Ok(NeighborSearch::Ivf { probes }),
                        _ => Err(bad()),
                    }
                } else {
                    Err(bad())
                }
            }
        }
    }
}

impl Default for GenerateConfig {
    fn default() -> Self {
        GenerateConfig {
            seed: 0,
            n_items: 4,
            n_choices: 4,
            k: 100,
            k_c: 50,
            margin: 1.2,
            min_steps: 3,
            max_steps: 25,
            skip_first_step: true,
            knob1_min_steps: 5,
            n_constrained: 1,
            recipeqa_questions: QuestionsPerProcedure::Auto,
            cloze_field: ClozeField::Title,
            metric: Metric::L2,
            duplicate_epsilon: 1e-6,
            neighbors: NeighborSearch::Auto,
            knobs_mode: KnobsMode::Calibrated,
        }
    }
}

impl GenerateConfig {
    /// Check the parameters are usable; the message names the offending option.
    pub fn validate(&self) -> Result<(), String> {
        if self.n_items < 2 {
            return Err(format!("--items must be at least 2 (got {})", self.n_items));
        }
        if self.n_choices < 2 {
            return Err(format!("--choices must be at least 2 (got {})", self.n_choices));
        }
        if self.n_items > 8 {
            return Err(format!("--items must be at most 8 (got {}): orderings are enumerated", self.n_items));
        }
        if self.k == 0 || self.k_c == 0 {
            return Err("--k and --k-c must be positive".into());
        }
        if self.k_c > self.k {
            return Err(format!("--k-c ({}) cannot exceed --k ({})", self.k_c, self.k));
        }
        if self.k < self.n_choices - 1 {
            return Err(format!("--k ({}) must be at least the number of negatives ({})", self.k, self.n_choices - 1));
        }
        if !(self.margin.is_finite() && self.margin >= 1.0) {
            return Err(format!("--margin must be a number ≥ 1 (got {})", self.margin));
        }
        if self.min_steps > self.max_steps {
            return Err(format!("--min-steps ({}) exceeds --max-steps ({})", self.min_steps, self.max_steps));
        }
        if self.n_constrained >= self.n_choices {
            return Err(format!(
                "--constrained-negatives ({}) must be below the number of choices ({})",
                self.n_constrained, self.n_choices
            ));
        }
        Ok(())
    }

    /// [`GenerateConfig::validate`] plus what one task needs (ordering: enough distinct orderings).
    pub fn validate_for(&self, task: Task) -> Result<(), String> {
        self.validate()?;
        if task.shape() == TaskShape::Ordering {
            let perms: usize = (1..=self.n_items).product();
            if perms < self.n_choices {
                return Err(format!(
                    "--choices {} needs that many distinct orderings of --items {} (only {perms} exist)",
                    self.n_choices, self.n_items
                ));
            }
        }
        Ok(())
    }

    /// The feature-id prefix of the items a task's questions are made of.
    pub fn item_kind(&self, task: Task) -> ItemKind {
        match task {
            Task::TextualCloze => match self.cloze_field {
                ClozeField::Title => ItemKind::Title,
                ClozeField::Text => ItemKind::Text,
            },
            _ => ItemKind::Image,
        }
    }
}

/// The kind of item a question is made of, and so which feature ids it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    Title,
    Text,
    Image,
}

impl ItemKind {
    /// The feature-store id prefix (`title:`, `text:`, `image:`).
    pub fn prefix(self) -> &'static str {
        match self {
            ItemKind::Title => "title:",
            ItemKind::Text => "text:",
            ItemKind::Image => "image:",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_settings_parse_and_enumerate() {
        let k: KnobSetting = "0,1,1".parse().unwrap();
        assert_eq!(k, KnobSetting { k1: 0, k2: 1, k3: 1 });
        assert_eq!("(1,0,1)".parse::<KnobSetting>().unwrap(), KnobSetting { k1: 1, k2: 0, k3: 1 });
        assert!("0,2,1".parse::<KnobSetting>().is_err());
        assert!("0,1".parse::<KnobSetting>().is_err());
        let all = KnobSetting::all();
        assert_eq!(all.len(), 8);
        assert_eq!(all[3], KnobSetting { k1: 0, k2: 1, k3: 1 });
        let labels: Vec<String> = Mode::suite().iter().map(Mode::label).collect();
        assert_eq!(labels[0], "recipeqa");
        assert_eq!(labels[4], "knobs-0-1-1");
        for m in Mode::suite() {
            assert_eq!(Mode::parse_label(&m.label()), Some(m));
        }
    }

    #[test]
    fn paired_settings_share_k1_and_ordering_has_no_knob3() {
        let k = |k1, k2, k3| Mode::Knobs(KnobSetting { k1, k2, k3 });
        assert_eq!(k(1, 1, 0).paired(Task::VisualCloze), vec![k(1, 0, 0), k(1, 0, 1), k(1, 1, 0), k(1, 1, 1)]);
        assert_eq!(k(0, 1, 1).paired(Task::VisualOrdering), vec![k(0, 0, 0), k(0, 1, 0)]);
        assert_eq!(Mode::RecipeQa.paired(Task::VisualOrdering), vec![Mode::RecipeQa]);
        assert_eq!(k(0, 1, 1).data_mode(Task::VisualOrdering), k(0, 1, 0));
        assert_eq!(k(0, 1, 1).data_mode(Task::VisualCoherence), k(0, 1, 1));
        assert_eq!(Mode::RecipeQa.data_mode(Task::VisualOrdering), Mode::RecipeQa);
    }

    #[test]
    fn defaults_validate_and_bad_values_name_the_option() {
        // The papers' distance (Euclidean on image features) is the default.
        assert_eq!(GenerateConfig::default().metric, Metric::L2);
        assert!(GenerateConfig::default().validate().is_ok());
        let bad = GenerateConfig { k_c: 200, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("--k-c"));
        let bad = GenerateConfig { margin: 0.5, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("--margin"));
    }
}
