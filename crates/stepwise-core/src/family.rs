//! Task families: what a generated task set holds. RecipeQA's four question types (made the RecipeQA way or with
//! Meta-RecipeQA's knobs), step sequencing with every valid order, and R2VQ's competence questions as one typed
//! value: `generate` parses `--task` into a [`TaskSelection`] and dispatches on it by `match`, and the writers
//! take their manifest kind from [`TaskFamily::manifest_kind`]. Within the RecipeQA family every crate matches on
//! [`Task`], so adding a question type is a `Task` variant and the compiler names every place that must handle it.

use crate::taskset::Task;

/// A task family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskFamily {
    /// Multiple-choice questions of one of RecipeQA's question types (a `taskset`).
    RecipeQa(Task),
    /// Step-sequencing instances with their valid orders (a `sequencing` set).
    Sequencing,
    /// R2VQ competence questions over annotated recipes (an `r2vq-questions` set).
    R2vq,
}

impl TaskFamily {
    /// Every family: RecipeQA's question types ([`Task::ALL`]), then sequencing and R2VQ.
    pub fn all() -> impl Iterator<Item = TaskFamily> {
        Task::ALL.into_iter().map(TaskFamily::RecipeQa).chain([TaskFamily::Sequencing, TaskFamily::R2vq])
    }

    /// The name users write (`--task`) and files carry.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskFamily::RecipeQa(t) => t.as_str(),
            TaskFamily::Sequencing => "sequencing",
            TaskFamily::R2vq => "r2vq",
        }
    }

    pub fn parse(s: &str) -> Option<TaskFamily> {
        match s {
            "sequencing" => Some(TaskFamily::Sequencing),
            "r2vq" => Some(TaskFamily::R2vq),
            _ => Task::parse(s).map(TaskFamily::RecipeQa),
        }
    }

    /// The `kind` of the manifest of a set of this family.
    pub fn manifest_kind(self) -> &'static str {
        match self {
            TaskFamily::RecipeQa(_) => "taskset",
            TaskFamily::Sequencing => "sequencing",
            TaskFamily::R2vq => "r2vq-questions",
        }
    }

    /// The RecipeQA question type, for that family.
    pub fn recipeqa(self) -> Option<Task> {
        match self {
            TaskFamily::RecipeQa(t) => Some(t),
            TaskFamily::Sequencing | TaskFamily::R2vq => None,
        }
    }
}

impl std::fmt::Display for TaskFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// What a `--task` list asks for: one or more RecipeQA question types (generated together), or one other family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskSelection {
    RecipeQa(Vec<Task>),
    Sequencing,
    R2vq,
}

impl TaskSelection {
    /// Parse task names (`all` = RecipeQA's four question types), keeping order and dropping repeats. Sequencing and
    /// R2VQ stand alone; the error lists the names that are valid where the bad one was given.
    pub fn parse(raw: &[String]) -> Result<TaskSelection, String> {
        let names: Vec<&str> = raw.iter().map(|t| t.trim()).collect();
        if let [one] = names.as_slice() {
            match TaskFamily::parse(one) {
                Some(TaskFamily::Sequencing) => return Ok(TaskSelection::Sequencing),
                Some(TaskFamily::R2vq) => return Ok(TaskSelection::R2vq),
                Some(TaskFamily::RecipeQa(_)) | None => {}
            }
        }
        let mut out: Vec<Task> = Vec::new();
        for t in names {
            let add: Vec<Task> = if t == "all" {
                Task::ALL.to_vec()
            } else {
                match TaskFamily::parse(t).and_then(TaskFamily::recipeqa) {
                    Some(x) => vec![x],
                    None => {
                        return Err(format!(
                            "unknown task {t:?} ({}, all{})",
                            Task::names(),
                            if raw.len() == 1 { ", sequencing, r2vq" } else { "" }
                        ));
                    }
                }
            };
            for x in add {
                if !out.contains(&x) {
                    out.push(x);
                }
            }
        }
        Ok(TaskSelection::RecipeQa(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(v: &[&str]) -> Result<TaskSelection, String> {
        TaskSelection::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn names_round_trip_and_kinds_follow_the_family() {
        assert_eq!(TaskFamily::all().count(), 6);
        for f in TaskFamily::all() {
            assert_eq!(TaskFamily::parse(f.as_str()), Some(f));
        }
        assert_eq!(TaskFamily::parse("visual_ordering").and_then(TaskFamily::recipeqa), Some(Task::VisualOrdering));
        assert_eq!(TaskFamily::Sequencing.manifest_kind(), "sequencing");
        assert_eq!(TaskFamily::R2vq.manifest_kind(), "r2vq-questions");
        assert_eq!(TaskFamily::RecipeQa(Task::TextualCloze).manifest_kind(), "taskset");
        assert_eq!(TaskFamily::parse("all"), None);
    }

    #[test]
    fn selections_expand_all_keep_order_and_keep_other_families_alone() {
        assert_eq!(sel(&["all"]), Ok(TaskSelection::RecipeQa(Task::ALL.to_vec())));
        assert_eq!(
            sel(&["visual_ordering", " textual_cloze", "visual_ordering"]),
            Ok(TaskSelection::RecipeQa(vec![Task::VisualOrdering, Task::TextualCloze]))
        );
        assert_eq!(sel(&[" sequencing "]), Ok(TaskSelection::Sequencing));
        assert_eq!(sel(&["r2vq"]), Ok(TaskSelection::R2vq));
        let e = sel(&["sequencing", "visual_cloze"]).unwrap_err();
        assert!(e.starts_with("unknown task \"sequencing\"") && !e.contains("r2vq"), "{e}");
        let e = sel(&["cloze"]).unwrap_err();
        assert_eq!(
            e,
            "unknown task \"cloze\" (textual_cloze, visual_cloze, visual_coherence, visual_ordering, all, sequencing, \
             r2vq)"
        );
    }
}
