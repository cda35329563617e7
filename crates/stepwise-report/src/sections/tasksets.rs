//! Task sets made by `stepwise generate` (outside suites): questions per task and split, from the manifest.

use stepwise_core::{Manifest, Result};

use super::{count, setting_label};
use crate::doc::{Section, Table};
use crate::scan::Artefact;

pub struct TaskSetInfo {
    pub rel: String,
    pub setting: Option<String>,
    pub tasks: Vec<TaskCounts>,
    pub command: Option<String>,
}

/// Questions of one task of a task set.
pub struct TaskCounts {
    pub task: String,
    pub questions: u64,
    pub train: Option<u64>,
    pub val: Option<u64>,
    pub test: Option<u64>,
    pub procedures_used: Option<u64>,
}

pub fn read(a: &Artefact) -> Result<TaskSetInfo> {
    let m = Manifest::read(&a.path)?;
    let mut tasks = Vec::new();
    for (k, &n) in &m.counts {
        if let Some(task) = k.strip_suffix(".questions") {
            let c = |suffix: &str| m.counts.get(&format!("{task}.{suffix}")).copied();
            tasks.push(TaskCounts {
                task: task.to_string(),
                questions: n,
                train: c("questions.train"),
                val: c("questions.val"),
                test: c("questions.test"),
                procedures_used: c("procedures_used"),
            });
        }
    }
    // A one-task set (`generate --task visual_cloze`) keeps its counts unprefixed, with the task in `params.task`.
    if tasks.is_empty()
        && let (Some(task), Some(&n)) = (m.params.get("task").and_then(|v| v.as_str()), m.counts.get("questions"))
    {
        let c = |k: &str| m.counts.get(k).copied();
        tasks.push(TaskCounts {
            task: task.to_string(),
            questions: n,
            train: c("questions.train"),
            val: c("questions.val"),
            test: c("questions.test"),
            procedures_used: c("procedures_used"),
        });
    }
    let setting = m.params.get("setting").and_then(|v| v.as_str()).map(str::to_string);
    let command = (!m.command.is_empty()).then(|| m.command.join(" "));
    Ok(TaskSetInfo { rel: a.rel.clone(), setting, tasks, command })
}

/// One line per task set: its setting and questions per task with the test split (the numbers a reader compares).
pub fn headlines(sets: &[TaskSetInfo]) -> Vec<String> {
    sets.iter()
        .filter(|s| !s.tasks.is_empty())
        .map(|set| {
            let tasks: Vec<String> = set
                .tasks
                .iter()
                .map(|c| {
                    let test = c.test.map_or(String::new(), |t| format!(", {} in test", count(t)));
                    format!("{} {}{test}", c.task, count(c.questions))
                })
                .collect();
            format!(
                "Task set `{}`{}: {} questions ({}).",
                set.rel,
                set.setting.as_deref().map_or(String::new(), |s| format!(", setting {}", setting_label(s))),
                count(set.tasks.iter().map(|c| c.questions).sum()),
                tasks.join("; ")
            )
        })
        .collect()
}

pub fn section(sets: &[TaskSetInfo]) -> Option<Section> {
    if sets.iter().all(|s| s.tasks.is_empty()) {
        return None;
    }
    let mut s = Section::new("tasks", "Task sets");
    s.para(
        "Multiple-choice questions in RecipeQA's layout (4 items, 4 choices, one correct), split by procedure. \
         Textual cloze: choose the missing step title; visual cloze: the missing step image; visual coherence: \
         the image that does not belong; visual ordering: the correct order of four images.",
    );
    let mut t =
        Table::new(&["task set", "setting", "task", ">questions", ">train", ">val", ">test", ">procedures used"]);
    let o = |v: &Option<u64>| v.map_or("–".into(), count);
    for set in sets {
        for c in &set.tasks {
            t.row(vec![
                format!("`{}`", set.rel),
                set.setting.as_deref().map_or("–".into(), setting_label),
                c.task.clone(),
                count(c.questions),
                o(&c.train),
                o(&c.val),
                o(&c.test),
                o(&c.procedures_used),
            ]);
        }
    }
    s.table(t);
    let cmds: Vec<String> =
        sets.iter().filter_map(|x| x.command.as_ref().map(|c| format!("`{}`: `{c}`", x.rel))).collect();
    if !cmds.is_empty() {
        s.push(crate::doc::Block::List(cmds));
    }
    Some(s)
}
