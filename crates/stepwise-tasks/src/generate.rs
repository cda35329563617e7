//! Generating questions: catalog → plans (one per task and mode) → nearest neighbours of every planned query item
//! (computed once, shared by the tasks and modes) → questions, in parallel over procedures.
//!
//! A [`TaskGenerator`] serves every task of one item kind: the three visual tasks share one image catalog and
//! one neighbour table, so a suite searches neighbours once for all of them.
//!
//! Determinism: every random choice is drawn from `rng_for(seed, key)` with a key per procedure and question, and
//! results are collected in corpus order, so the output does not depend on the number of threads.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;
use stepwise_core::rng::rng_for;
use stepwise_core::shard::Shard;
use stepwise_core::taskset::ContextStep;
use stepwise_core::{Error, Procedure, Question, Result, Split, Task};

use crate::calibrated::{self, Balance, pilot_stride};
use crate::catalog::{Catalog, FeatureSources};
use crate::config::{GenerateConfig, ItemKind, KnobsMode, Mode};
use crate::counts::{Counts, SkipReason};
use crate::negatives::{knob2_stats, valid};
use crate::neighbors::NeighborTable;
use crate::plan::{Plan, plan};
use crate::questions::{Drawn, Made, Maker, ProcView, Shared, context_steps};
use crate::range::BallRequest;

/// Procedures per chunk of [`TaskGenerator::build_chunked`]: enough parallel work per chunk, a bounded number
/// of questions in memory. Large, because each chunk's deferred widened searches are measured together
/// ([`crate::range::RangeIndex::fill_balls`]), gathering the rows of every list they touch once per chunk.
const BUILD_CHUNK: usize = 2048;

/// The questions of one procedure and the context they all share (their own `context` fields are empty).
pub struct ProcedureQuestions {
    pub context: Vec<ContextStep>,
    pub questions: Vec<Question>,
}

impl ProcedureQuestions {
    /// The questions, each with its own copy of the context.
    pub fn into_questions(self) -> Vec<Question> {
        let ProcedureQuestions { context, mut questions } = self;
        if let Some((last, rest)) = questions.split_last_mut() {
            for q in rest {
                q.context = context.clone();
            }
            last.context = context;
        }
        questions
    }
}

/// What questions are made from.
pub struct Inputs<'a> {
    pub procedures: &'a [Procedure],
    pub sources: FeatureSources<'a>,
    /// The split of each procedure (by id); questions of procedures not in the map have no `split`.
    pub splits: Option<&'a BTreeMap<String, Split>>,
}

/// The questions of one task in one mode, and what was left out.
#[derive(Debug, Clone)]
pub struct Generated {
    pub task: Task,
    pub mode: Mode,
    pub questions: Vec<Question>,
    pub counts: Counts,
}

/// Generates the questions of the tasks of one item kind, in any number of modes, sharing the catalog and the
/// neighbours. It keeps no reference to the feature vectors (the catalog holds the rows it needs), so callers
/// may free them once it is built.
pub struct TaskGenerator<'a> {
    pub kind: ItemKind,
    pub cfg: GenerateConfig,
    procedures: &'a [Procedure],
    splits: Option<&'a BTreeMap<String, Split>>,
    cat: Catalog,
    table: NeighborTable,
    /// Make only the questions of these procedures (a shard of a sweep); everything else is as in a full run.
    only: Option<std::ops::Range<usize>>,
}

impl<'a> TaskGenerator<'a> {
    /// Build the catalog of `kind` items. Errors: invalid configuration (usage), missing features (bad input).
    pub fn for_kind(
        kind: ItemKind,
        procedures: &'a [Procedure],
        sources: &FeatureSources<'_>,
        splits: Option<&'a BTreeMap<String, Split>>,
        cfg: &GenerateConfig,
    ) -> Result<Self> {
        cfg.validate().map_err(Error::usage)?;
        let cat = Catalog::build(procedures, sources, kind, cfg)?;
        Ok(TaskGenerator {
            kind,
            cfg: cfg.clone(),
            procedures,
            splits,
            cat,
            table: NeighborTable::with_seed(cfg.k, cfg.neighbors, cfg.seed),
            only: None,
        })
    }

    /// A generator for the item kind of `task`.
    pub fn new(task: Task, inputs: &Inputs<'a>, cfg: &GenerateConfig) -> Result<Self> {
        cfg.validate_for(task).map_err(Error::usage)?;
        Self::for_kind(cfg.item_kind(task), inputs.procedures, &inputs.sources, inputs.splits, cfg)
    }

    pub fn catalog(&self) -> &Catalog {
        &self.cat
    }

    /// Plan the questions of `task` in `mode` (positions only; cheap).
    pub fn plan(&self, task: Task, mode: Mode) -> Result<Plan> {
        self.cfg.validate_for(task).map_err(Error::usage)?;
        if self.cfg.item_kind(task) != self.kind {
            return Err(Error::usage(format!("{task} is not made of {:?} items", self.kind)));
        }
        Ok(plan(task, mode, self.procedures, &self.cat, &self.cfg))
    }

    /// Make only the questions of the procedures of `shard` (a contiguous slice of the corpus; see
    /// [`stepwise_core::shard`]). Plans, the catalog, the splits and every random stream stay those of the whole
    /// corpus, so the shards' questions and counts add up to a full run's.
    pub fn restrict_to(&mut self, shard: Shard) {
        self.only = Some(shard.range(self.procedures.len()));
    }

    /// The procedures whose questions this generator makes.
    fn procedure_range(&self) -> std::ops::Range<usize> {
        self.only.clone().unwrap_or(0..self.procedures.len())
    }

    /// Compute the neighbours every plan in `plans` will ask for (in a shard: those of its own procedures, with
    /// the search method a full run would choose for all of them).
    pub fn prepare(&mut self, plans: &[&Plan]) -> Result<()> {
        let mine = self.procedure_range();
        // Each query item with the first procedure asking for it (procedures may share an item, e.g. a title).
        let mut first_asker: BTreeMap<u32, usize> = BTreeMap::new();
        let mut queries = BTreeSet::new();
        for p in plans {
            let pilot: BTreeSet<usize> = self.pilot(p).into_iter().map(|(proc, _)| proc).collect();
            for (proc, item) in query_items(p, &self.cat) {
                let first = first_asker.entry(item).or_insert(proc);
                *first = (*first).min(proc);
                // A shard also searches the calibrated knobs' pilot questions: every part fits its balance on
                // the same pilot as a whole run.
                if mine.contains(&proc) || pilot.contains(&proc) {
                    queries.insert(item);
                }
            }
        }
        let all: BTreeSet<u32> = first_asker.keys().copied().collect();
        let counted = self
            .only
            .as_ref()
            .map(|_| first_asker.iter().filter(|(_, p)| mine.contains(p)).map(|(&item, _)| item).collect());
        self.table.ensure_as_part_of(&self.cat, &queries, &all, counted)
    }

    /// Query items whose neighbours have been computed.
    pub fn neighbor_queries(&self) -> usize {
        self.table.len()
    }

    /// The neighbours of `items` (computed if needed), as (item, distance) lists.
    pub fn neighbors_of(&mut self, items: &[u32]) -> Result<Vec<Vec<(u32, f32)>>> {
        self.table.ensure(&self.cat, &items.iter().copied().collect())?;
        Ok(items.iter().map(|&i| self.table.get(i).to_vec()).collect())
    }

    /// How much of an exact widened search (every catalog item in range) knob 2's widening finds, with each of
    /// `items` as a cloze answer and its shell's outer bound (m_d + s_d of its K_C nearest): (items found, items
    /// in range), summed over `items`. Equal unless the neighbours are from IVF, whose widening scans the probed
    /// lists only ([`NeighborTable::probed_lists`]).
    pub fn widening_recall(&mut self, items: &[u32]) -> Result<(usize, usize)> {
        self.table.ensure(&self.cat, &items.iter().copied().collect())?;
        let (cat, table) = (&self.cat, &self.table);
        let above = self.cfg.duplicate_epsilon as f32;
        let ranges = table.ranges(cat);
        let (mut found, mut all) = (0, 0);
        for &q in items {
            let cands = valid(table.get(q), above, &[]);
            let Some((m, s)) = knob2_stats(&cands[..cands.len().min(self.cfg.k_c)]) else { continue };
            let exact = ranges.within(cat, &[q], above, m + s, None).len();
            found += match table.probed_lists(&[q]) {
                Some(only) => ranges.within(cat, &[q], above, m + s, Some(&only)).len(),
                None => exact,
            };
            all += exact;
        }
        Ok((found, all))
    }

    /// How neighbours were searched so far (`exact`, `hnsw`) and how many HNSW queries fell back to exact.
    pub fn neighbor_methods(&self) -> (Vec<String>, usize) {
        (self.table.methods(), self.table.exact_fallbacks)
    }

    /// Make the planned questions (neighbours must be prepared for this plan).
    pub fn build(&self, plan: &Plan) -> Generated {
        let mut questions = Vec::new();
        let counts = self
            .build_chunked(plan, |qs| {
                questions.extend(qs);
                Ok(())
            })
            .expect("collecting into a Vec cannot fail");
        Generated { task: plan.task, mode: plan.mode, questions, counts }
    }

    /// Make the planned questions a chunk of procedures at a time, handing each chunk's questions (in corpus
    /// order) to `sink` — a writer can stream them to disk. Chunks are cut by procedure count, never by thread
    /// count, so the sequence of questions is the same for any `--threads`.
    pub fn build_chunked(&self, plan: &Plan, mut sink: impl FnMut(Vec<Question>) -> Result<()>) -> Result<Counts> {
        self.build_grouped(plan, |groups| {
            let mut qs = Vec::with_capacity(groups.iter().map(|g| g.questions.len()).sum());
            for g in groups {
                qs.extend(g.into_questions());
            }
            sink(qs)
        })
    }

    /// As [`Self::build_chunked`], with each procedure's questions grouped with their shared context (not copied
    /// into each question): a writer serialises the context once per procedure instead of once per question.
    ///
    /// A knob setting is built together with the settings paired with it ([`Mode::paired`]) and keeps a question
    /// only when all of them can make it, so one setting generated alone has exactly the questions it has in a
    /// suite. Visual ordering with k3 = 1 gives the k3 = 0 questions ([`Mode::data_mode`]).
    pub fn build_grouped(
        &self,
        plan: &Plan,
        mut sink: impl FnMut(Vec<ProcedureQuestions>) -> Result<()>,
    ) -> Result<Counts> {
        let data = plan.mode.data_mode(plan.task);
        let modes = data.paired(plan.task);
        let idx = modes.iter().position(|m| *m == data).expect("a setting is paired with itself");
        let mut counts = self.build_paired(plan, &modes, |i, groups| if i == idx { sink(groups) } else { Ok(()) })?;
        Ok(counts.swap_remove(idx))
    }

    /// Make the planned questions in every setting of `modes` at once — RecipeQA mode alone, or knob settings
    /// sharing the plan's k1 (normally [`Mode::paired`]) — handing each chunk of procedures' questions of
    /// `modes[i]` to `sink(i, …)`, and return the counts of each setting.
    ///
    /// Pairing: a planned question is kept in every setting or in none. Each setting draws its own negatives
    /// (its own random stream, as if generated alone); when one setting cannot meet its constraint even after
    /// widening the search, the question is left out of all of them and counted under that setting's reason
    /// there and as `paired_setting_failed` in the others. So settings with the same k1 have the same qids,
    /// question items and answers, and differ only in their negatives.
    pub fn build_paired(
        &self,
        plan: &Plan,
        modes: &[Mode],
        mut sink: impl FnMut(usize, Vec<ProcedureQuestions>) -> Result<()>,
    ) -> Result<Vec<Counts>> {
        let fits = |m: &Mode| match (plan.mode, m) {
            (Mode::RecipeQa, Mode::RecipeQa) => true,
            (Mode::Knobs(p), Mode::Knobs(k)) => p.k1 == k.k1 && *m == m.data_mode(plan.task),
            _ => false,
        };
        if modes.is_empty() || !modes.iter().all(fits) {
            return Err(Error::usage(format!(
                "settings {:?} cannot be built from a {} plan of {}",
                modes.iter().map(Mode::label).collect::<Vec<_>>(),
                plan.mode.label(),
                plan.task
            )));
        }
        let base = Counts { procedures: self.procedures.len() as u64, ..Default::default() };
        let mut counts = vec![base; modes.len()];
        let range = self.procedure_range();
        let balance = self.balance(plan, modes);
        let mut start = range.start;
        while start < range.end {
            let end = (start + BUILD_CHUNK).min(range.end);
            let built = self.build_range(plan, modes, balance.as_ref(), start..end, &mut counts);
            for (i, groups) in built.into_iter().enumerate() {
                sink(i, groups)?;
            }
            start = end;
        }
        Ok(counts)
    }

    /// Calibrated knobs: the pilot questions of `plan` (procedure, question index), every
    /// [`pilot_stride`]-th planned question of the whole corpus in plan order; none otherwise.
    fn pilot(&self, plan: &Plan) -> Vec<(usize, usize)> {
        if !(matches!(plan.mode, Mode::Knobs(_)) && self.cfg.knobs_mode == KnobsMode::Calibrated) {
            return Vec::new();
        }
        let all: Vec<(usize, usize)> =
            plan.procs.iter().enumerate().flat_map(|(i, pp)| (0..pp.questions.len()).map(move |q| (i, q))).collect();
        let stride = pilot_stride(all.len());
        all.into_iter().step_by(stride).collect()
    }

    /// Calibrated knobs: the balance ([`Balance::fit`]) of the draws every setting of `modes` tries for the
    /// pilot questions; `None` for RecipeQA mode and paper knobs.
    pub fn balance(&self, plan: &Plan, modes: &[Mode]) -> Option<Balance> {
        let pilot = self.pilot(plan);
        if pilot.is_empty() {
            return None;
        }
        let makers = self.makers(plan.task, modes);
        let drawn: Vec<(usize, Vec<Drawn>)> = pilot
            .par_iter()
            .filter_map(|&(i, q)| {
                let pq = &plan.procs[i].questions[q];
                let mut shared = Shared::default();
                let drawn: Option<Vec<Drawn>> =
                    makers.iter().map(|m| m.choose(&self.view(i), pq, &mut shared).ok()).collect();
                Some((Balance::half(&self.procedures[i].id), drawn?))
            })
            .collect();
        let leads: Vec<(usize, Vec<&[calibrated::Lead]>)> =
            drawn.iter().map(|(h, d)| (*h, d.iter().map(Drawn::leads).collect())).collect();
        Some(Balance::fit(&leads))
    }

    /// One question maker per setting of `modes`.
    fn makers(&self, task: Task, modes: &[Mode]) -> Vec<Maker<'_>> {
        modes.iter().map(|&mode| Maker { task, mode, cfg: &self.cfg, cat: &self.cat, table: &self.table }).collect()
    }

    fn view(&self, i: usize) -> ProcView<'_> {
        let p = &self.procedures[i];
        let split = self.splits.and_then(|m| m.get(&p.id)).map(|s| s.as_str());
        ProcView { index: i, procedure: p, entry: &self.cat.procs[i], split }
    }

    /// The questions of procedures `range` in each of `modes` (one group per procedure with questions), adding
    /// their counts to `counts` (one per mode).
    fn build_range(
        &self,
        plan: &Plan,
        modes: &[Mode],
        balance: Option<&Balance>,
        range: std::ops::Range<usize>,
        counts: &mut [Counts],
    ) -> Vec<Vec<ProcedureQuestions>> {
        let task = plan.task;
        let makers = self.makers(task, modes);
        let procs = self.procedures;
        let offset = range.start;
        type PerMode<T> = Vec<Vec<T>>;
        fn per_mode<T>(n: usize) -> PerMode<T> {
            (0..n).map(|_| Vec::new()).collect()
        }
        let nm = modes.len();
        let view = |i: usize| self.view(i);
        // Every planned question in every mode; `None` for one whose widened search waits for its balls. Every
        // setting draws first and the questions are made only when all of them could: a question one setting
        // cannot make is kept in none, and most knob-setting questions of the visual tasks end so (each setting
        // still draws, for its own skip reason in the counts).
        type Results = Vec<std::result::Result<Made, SkipReason>>;
        let make_all = |view: &ProcView<'_>,
                        pq: &crate::plan::PlannedQuestion,
                        shared: &mut _,
                        requests: &mut Vec<BallRequest>| {
            let mut drawn: Vec<_> = makers.iter().map(|m| m.choose(view, pq, shared)).collect();
            let missing = shared.take_requests();
            if !missing.is_empty() {
                requests.extend(missing);
                return None;
            }
            // Calibrated knobs: every setting tried several draws; the balance keeps one of each, or leaves the
            // question out of all of them.
            if let (Some(balance), true) = (balance, drawn.iter().all(|d| d.is_ok())) {
                let tried: Vec<&Drawn> =
                    drawn.iter().map(|d| d.as_ref().expect("checked: every setting drew")).collect();
                let leads: Vec<&[calibrated::Lead]> = tried.iter().map(|d| d.leads()).collect();
                let k1 = match plan.mode {
                    Mode::Knobs(k) => k.k1,
                    Mode::RecipeQa => unreachable!("a balance is for knob settings"),
                };
                let key = format!("tasks/calibrated-keep/{task}/k1={k1}/{}/{}", view.procedure.id, pq.attempt);
                match balance.pick(Balance::half(&view.procedure.id), &leads, &mut rng_for(self.cfg.seed, &key)) {
                    Some(picks) => {
                        for (d, p) in drawn.iter_mut().zip(picks) {
                            d.as_mut().expect("checked: every setting drew").keep(p);
                        }
                    }
                    None => return Some((0..makers.len()).map(|_| Err(SkipReason::CalibratedBalance)).collect()),
                }
            }
            let results: Results = if drawn.iter().all(|d| d.is_ok()) {
                let drawn = drawn.into_iter().map(|d| d.expect("checked: every setting drew"));
                makers.iter().zip(drawn).map(|(m, d)| Ok(m.finish(view, pq, shared, d))).collect()
            } else {
                drawn.into_iter().map(|d| Err(d.err().unwrap_or(SkipReason::PairedSettingFailed))).collect()
            };
            Some(results)
        };
        let mut first: Vec<(Vec<Option<Results>>, Vec<BallRequest>)> = range
            .clone()
            .into_par_iter()
            .map(|i| {
                let view = view(i);
                let mut requests = Vec::new();
                let results = plan.procs[i]
                    .questions
                    .iter()
                    .map(|pq| make_all(&view, pq, &mut Shared::deferring(), &mut requests))
                    .collect();
                (results, requests)
            })
            .collect();
        // The balls the deferred questions need, measured together; then those questions made again (a
        // question's random stream depends on its key alone, so it comes out as if made in one go).
        let requests: Vec<BallRequest> = first.iter_mut().flat_map(|(_, r)| std::mem::take(r)).collect();
        if !requests.is_empty() {
            self.table.ranges(&self.cat).fill_balls(&self.cat, requests);
            first.par_iter_mut().zip(range.clone()).for_each(|((results, _), i)| {
                let view = view(i);
                for (slot, pq) in results.iter_mut().zip(&plan.procs[i].questions) {
                    if slot.is_none() {
                        *slot = make_all(&view, pq, &mut Shared::default(), &mut Vec::new());
                    }
                }
            });
        }
        let per_proc: Vec<(PerMode<Made>, PerMode<SkipReason>, Vec<ContextStep>)> = first
            .into_par_iter()
            .zip(range.clone())
            .map(|((results, _), i)| {
                let pp = &plan.procs[i];
                if pp.questions.is_empty() {
                    return (per_mode(nm), per_mode(nm), Vec::new());
                }
                let p = &procs[i];
                let mut made: PerMode<Made> = per_mode(nm);
                let mut skips: PerMode<SkipReason> = per_mode(nm);
                for results in results {
                    let results = results.expect("every deferred question was made again");
                    if results.iter().all(|r| r.is_ok()) {
                        for (j, r) in results.into_iter().enumerate() {
                            made[j].push(r.expect("checked: every setting made the question"));
                        }
                    } else {
                        for (j, r) in results.into_iter().enumerate() {
                            skips[j].push(r.err().unwrap_or(SkipReason::PairedSettingFailed));
                        }
                    }
                }
                let context = if made[0].is_empty() { Vec::new() } else { context_steps(p, task, &self.cfg) };
                (made, skips, context)
            })
            .collect();

        let mut groups: PerMode<ProcedureQuestions> = per_mode(nm);
        for (j, (made, skips, context)) in per_proc.into_iter().enumerate() {
            let i = offset + j;
            let pp = &plan.procs[i];
            for (((c, made), skips), out) in counts.iter_mut().zip(made).zip(skips).zip(groups.iter_mut()) {
                if let Some(r) = pp.skipped {
                    c.skip_procedure(r);
                }
                if pp.skipped != Some(SkipReason::StepCountOutOfRange) {
                    for &(r, n) in &self.cat.procs[i].excluded {
                        c.exclude_steps(r, n);
                    }
                }
                c.skip_questions(SkipReason::Knob1PoolExhausted, pp.exhausted);
                for r in skips {
                    c.skip_questions(r, 1);
                }
                if made.is_empty() {
                    continue;
                }
                c.procedures_used += 1;
                c.questions += made.len() as u64;
                let mut qs = Vec::with_capacity(made.len());
                for m in made {
                    let split = m.question.split.clone().unwrap_or_else(|| "none".to_string());
                    *c.questions_by_split.entry(split).or_insert(0) += 1;
                    c.questions_widened += u64::from(m.widened);
                    qs.push(m.question);
                }
                out.push(ProcedureQuestions { context: context.clone(), questions: qs });
            }
        }
        groups
    }

    /// Plan, prepare and build one task in one mode.
    pub fn generate(&mut self, task: Task, mode: Mode) -> Result<Generated> {
        let p = self.plan(task, mode)?;
        self.prepare(&[&p])?;
        Ok(self.build(&p))
    }
}

/// The items whose neighbours a plan's questions need, with the index of the procedure asking: the answer
/// (cloze), the replaced image (coherence in RecipeQA mode) or the coherent images (coherence with knobs); none
/// for ordering.
fn query_items(plan: &Plan, cat: &Catalog) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    for (i, (entry, pp)) in cat.procs.iter().zip(&plan.procs).enumerate() {
        for q in &pp.questions {
            let item = |pos: usize| (i, entry.eligible[pos].item);
            match (plan.task, plan.mode) {
                (Task::TextualCloze | Task::VisualCloze, _) | (Task::VisualCoherence, Mode::RecipeQa) => {
                    out.push(item(q.positions[q.slot]))
                }
                (Task::VisualCoherence, Mode::Knobs(_)) => {
                    out.extend(q.positions.iter().enumerate().filter(|(s, _)| *s != q.slot).map(|(_, &p)| item(p)))
                }
                (Task::VisualOrdering, _) => {}
            }
        }
    }
    out
}

/// Generate the questions of `task` in `mode` (a [`TaskGenerator`] for a single task and mode).
pub fn generate(task: Task, inputs: &Inputs<'_>, cfg: &GenerateConfig, mode: Mode) -> Result<Generated> {
    TaskGenerator::new(task, inputs, cfg)?.generate(task, mode)
}
