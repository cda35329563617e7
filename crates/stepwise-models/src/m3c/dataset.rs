//! The questions of one task of a task set as model inputs, by split. A question whose items have no vector is
//! left out and counted (one bad item never stops a run); the caller decides whether that is acceptable.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stepwise_core::{Task, TaskSet};

use super::inputs::{FeatureSources, InputSpec, QuestionInput, question_input};

/// Inputs of one task, by split name (`train`, `val`, `test`, or `none` for questions without a split).
#[derive(Debug, Default)]
pub struct TaskInputs {
    pub by_split: BTreeMap<String, Vec<QuestionInput>>,
    pub skipped: Skipped,
}

/// Questions left out and why (the first few reasons as examples).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub count: usize,
    pub examples: Vec<String>,
}

impl TaskInputs {
    pub fn split(&self, name: &str) -> &[QuestionInput] {
        self.by_split.get(name).map_or(&[], Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.by_split.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The inputs of the `task` questions of `set` (in file order within each split).
pub fn task_inputs(set: &TaskSet, task: Task, spec: &InputSpec, sources: &FeatureSources<'_>) -> TaskInputs {
    let mut out = TaskInputs::default();
    for q in set.of_task(task.as_str()) {
        match question_input(q, spec, sources) {
            Ok(inp) => {
                let split = q.split.clone().unwrap_or_else(|| "none".to_string());
                out.by_split.entry(split).or_default().push(inp);
            }
            Err(e) => {
                out.skipped.count += 1;
                if out.skipped.examples.len() < 5 {
                    out.skipped.examples.push(e);
                }
            }
        }
    }
    out
}

/// The tasks present in `set`, in RecipeQA's order.
pub fn tasks_in(set: &TaskSet) -> Vec<Task> {
    let counts = set.counts_by_task();
    Task::ALL.into_iter().filter(|t| counts.contains_key(t.as_str())).collect()
}
