//! `stepwise bench reliability`: stepwise's guarantees measured in one command, on the demo corpus.
//!
//! 1. **Threads**: the whole demo pipeline (every stage a public command) plus `ingest`, `export` and `annotate
//!    create` at `--threads 1` and `--threads 2`; every file of every stage compared byte for byte.
//! 2. **kill -9**: `embed`, `sweep` and `train` killed at seeded random moments of their uninterrupted run time,
//!    then run again: what the kill left, whether the re-run resumed, what is left after it, and whether the final
//!    output equals the uninterrupted run's; `annotate serve` killed mid-study under load (`bench annotate`'s
//!    check, SQLite): acknowledged answers lost or duplicated.
//! 3. **Hostile inputs**: every fuzz target's reader fed hand-made hostile files, the fuzzer's findings
//!    (`fuzz/regressions`) and optionally a fuzzing corpus; and the resource-bound cases end to end through the
//!    CLI (a 1-GB line, a 10^12-element array, nesting a million deep, a decompression bomb, a symlink loop):
//!    exit code, error, output left behind, time and peak memory.
//!
//! Each part prints a Markdown table; the command fails (exit 1) when a guarantee does not hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use stepwise_cli::fuzz_targets;
use stepwise_cli::usage_bail;

/// Threads, kill -9 and hostile inputs: the guarantees of determinism, crash safety and input hardening.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepwise bench reliability                       # all three parts, demo corpus of 60 procedures\n  \
    stepwise bench reliability --only hostile --fuzz-corpus target/fuzz/work/corpus\n  \
    stepwise bench reliability --only kills --kills 5 --keep /tmp/rel")]
pub struct Args {
    /// Procedures in the demo corpus.
    #[arg(long, default_value_t = 60)]
    pub n: usize,
    /// Seeds the demo and the kill moments.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Kills per command.
    #[arg(long, default_value_t = 2)]
    pub kills: usize,
    /// Run one part only.
    #[arg(long, value_parser = ["threads", "kills", "hostile"])]
    pub only: Option<String>,
    /// Also replay a fuzzing corpus (`scripts/fuzz/fuzz.py` keeps one per target in target/fuzz/work/corpus).
    #[arg(long, value_name = "DIR")]
    pub fuzz_corpus: Option<PathBuf>,
    /// Size of the long-line file in the hostile part, in MiB.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub long_line_mib: u64,
    /// Keep the work folder here (default: a temporary folder, removed at the end).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.n < 30 {
        // Smaller demos can leave the sequencing test split empty (12 procedures do), and the demo then stops.
        usage_bail!("--n {}: at least 30 procedures (the demo's every stage needs all three splits)", a.n);
    }
    let temp;
    let work = match &a.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
            dir.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let exe = crate::stepwise_exe()?;
    let part = |name: &str| a.only.as_deref().is_none_or(|o| o == name);
    let mut failures = Vec::new();
    if part("threads") || part("kills") {
        // Both parts start from the demo at --threads 1 (the kill part's uninterrupted references).
        demo(&exe, &work.join("threads-1"), a.n, a.seed, 1)?;
    }
    if part("threads") {
        failures.extend(threads(&exe, &work, &a)?);
    }
    if part("kills") {
        failures.extend(kills(&exe, &work, &a)?);
    }
    if part("hostile") {
        failures.extend(hostile(&exe, &work, &a)?);
    }
    println!("\nreliability: {}", if failures.is_empty() { "PASS".to_string() } else { "FAIL".to_string() });
    if !failures.is_empty() {
        anyhow::bail!("bench reliability: {}", failures.join("; "));
    }
    Ok(())
}

/// Run `stepwise --threads T demo -n N -o DIR` (a child process: the thread count is per process).
fn demo(exe: &Path, dir: &Path, n: usize, seed: u64, threads: usize) -> anyhow::Result<()> {
    eprintln!("demo, {n} procedures, --threads {threads} → {}", dir.display());
    let (n, seed, threads) = (n.to_string(), seed.to_string(), threads.to_string());
    let out = dir.to_string_lossy();
    let argv = ["--threads", &threads, "-q", "demo", "-n", &n, "--seed", &seed, "-o", &out, "--force"];
    // The demo prints its tables on stdout even with -q.
    let status = Command::new(exe).args(argv).stdout(Stdio::null()).status()?;
    anyhow::ensure!(status.success(), "`stepwise {}` failed ({status})", argv.join(" "));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// Part 1: threads

/// The commands run on top of the demo in both thread settings, both in the `--threads 1` demo folder (a study
/// records its corpus's absolute path): (name, argv; the output `-o extra-tN/NAME` is added).
const EXTRA_COMMANDS: &[(&str, &[&str])] = &[
    ("ingest", &["ingest", "corpus/procedures.jsonl"]),
    ("export --to hf", &["export", "suite", "--to", "hf"]),
    ("annotate create", &["annotate", "create", "sequencing"]),
];

/// Files made from fresh randomness on purpose (the annotation study's admin password and its hash): listed, not
/// compared.
const SECRETS: &[&str] = stepwise_annotate::study::SECRET_FILES;

fn extra_output(threads: usize, name: &str) -> String {
    format!("extra-t{threads}/{}", name.split(' ').next().unwrap_or(name))
}

fn threads(exe: &Path, work: &Path, a: &Args) -> anyhow::Result<Vec<String>> {
    let dirs = [work.join("threads-1"), work.join("threads-2")];
    demo(exe, &dirs[1], a.n, a.seed, 2)?;
    for threads in [1, 2] {
        for (name, argv) in EXTRA_COMMANDS {
            let out = extra_output(threads, name);
            let _ = std::fs::remove_dir_all(dirs[0].join(&out));
            let status = Command::new(exe)
                .args(["--threads", &threads.to_string(), "-q"])
                .args(*argv)
                .args(["-o", &out])
                .current_dir(&dirs[0])
                .stdout(Stdio::null())
                .status()?;
            anyhow::ensure!(status.success(), "`stepwise {name}` in {} failed ({status})", dirs[0].display());
        }
    }
    // One row per demo stage folder (a top-level entry of the demo folder) and per extra command.
    let mut rows: Vec<(String, PathBuf, PathBuf)> = Vec::new();
    let mut top: Vec<_> = std::fs::read_dir(&dirs[0])?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
    top.sort();
    for name in top {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("extra-t") || name.starts_with("kill") || name.starts_with('.') {
            continue;
        }
        rows.push((name.clone(), dirs[0].join(&name), dirs[1].join(&name)));
    }
    for (name, _) in EXTRA_COMMANDS {
        rows.push((name.to_string(), dirs[0].join(extra_output(1, name)), dirs[0].join(extra_output(2, name))));
    }
    println!("\n## Threads: --threads 1 vs --threads 2 (demo, {} procedures, seed {})\n", a.n, a.seed);
    println!("| output (demo stage or command) | files | identical | differing |\n|---|---:|---:|---|");
    let mut failures = Vec::new();
    for (name, left, right) in rows {
        let mut left = tree_files(&left)?;
        let mut right = tree_files(&right)?;
        let secrets: Vec<String> = left.keys().filter(|k| SECRETS.iter().any(|s| k.ends_with(s))).cloned().collect();
        for k in &secrets {
            left.remove(k);
            right.remove(k);
        }
        let differing = differing_files(&left, &right);
        let note = if secrets.is_empty() {
            String::new()
        } else {
            format!(" (+ {} random by design: {})", secrets.len(), secrets.join(", "))
        };
        println!(
            "| {name} | {}{note} | {} | {} |",
            left.len(),
            left.len().saturating_sub(differing.len()),
            if differing.is_empty() { "–".to_string() } else { differing.join(", ") }
        );
        if !differing.is_empty() {
            failures.push(format!("--threads 1 and 2 differ in {name}: {}", differing.join(", ")));
        }
    }
    Ok(failures)
}

/// Every file under `root` (or `root` itself when it is a file): relative path → BLAKE3.
fn tree_files(root: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    if root.is_file() {
        out.insert(String::new(), stepwise_core::hash::hash_file(root)?.0);
        return Ok(out);
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root)?.to_string_lossy().into_owned();
                out.insert(rel, stepwise_core::hash::hash_file(&p)?.0);
            }
        }
    }
    Ok(out)
}

/// Files present on one side only or with different bytes.
fn differing_files(left: &BTreeMap<String, String>, right: &BTreeMap<String, String>) -> Vec<String> {
    let mut names: Vec<&String> = left.keys().chain(right.keys()).collect();
    names.sort();
    names.dedup();
    names.into_iter().filter(|n| left.get(*n) != right.get(*n)).map(|n| n.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------------------------
// Part 2: kill -9

/// The killed commands, run in the `--threads 1` demo folder: (name, argv without `-o OUT`). `train` is the
/// demo study's HTRN on the RecipeQA-mode visual cloze.
fn killed_commands(seed: &str) -> Vec<(&'static str, Vec<String>)> {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        ("embed", v(&["embed", "clean", "--encoder", "w2v", "--seed", seed])),
        (
            "sweep",
            v(&["sweep", "clean", "--features", "features/w2v", "--features", "features/descriptor", "--seed", seed]),
        ),
        (
            "train",
            v(&[
                "train",
                "suite/recipeqa/visual_cloze",
                "--task",
                "visual_cloze",
                "--features",
                "features/w2v",
                "--features",
                "features/descriptor",
                "--model",
                "htrn",
                "--htrn-layers",
                "1",
                "--htrn-dim",
                "64",
                "--htrn-heads",
                "4",
                "--epochs",
                "6",
                "--patience",
                "6",
                "--seed",
                seed,
            ]),
        ),
    ]
}

struct KillRow {
    command: String,
    kill_at: String,
    left_by_kill: String,
    rerun: String,
    left_after: usize,
    identical: String,
}

fn kills(exe: &Path, work: &Path, a: &Args) -> anyhow::Result<Vec<String>> {
    let dir = work.join("threads-1");
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (name, argv) in killed_commands(&a.seed.to_string()) {
        let reference = format!("kill/{name}-reference");
        let start = Instant::now();
        run_quiet(exe, &dir, &argv, &reference)?;
        let full = start.elapsed();
        let reference_files = tree_files(&dir.join(&reference))?;
        for k in 0..a.kills {
            let out = format!("kill/{name}");
            // A run that ends before its kill (it can be faster than the reference) tests nothing: the kill is
            // drawn again, earlier, up to three times.
            let mut fraction = rng.random_range(0.1..0.9);
            let (at, finished_first) = loop {
                let _ = std::fs::remove_dir_all(dir.join(&out));
                let at = full.mul_f64(fraction);
                let mut child = Command::new(exe)
                    .args(&argv)
                    .args(["-o", &out])
                    .current_dir(&dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()?;
                std::thread::sleep(at);
                let _ = child.kill(); // SIGKILL; fails only when the child has already exited
                // The exit status decides, not a check before the kill (the child may exit in between).
                let killed = std::os::unix::process::ExitStatusExt::signal(&child.wait()?) == Some(libc::SIGKILL);
                if killed || fraction < 0.02 {
                    break (at, !killed);
                }
                fraction /= 4.0;
            };
            if finished_first {
                failures.push(format!("{name} kill {k}: every kill came after the run had finished"));
            }
            let mut left = leftovers(&dir.join("kill"), name)?;
            if dir.join(&out).join(stepwise_features::store::WORK_DIR).is_dir() {
                left.push(format!("{name}/{} (resumable)", stepwise_features::store::WORK_DIR));
            }
            // A kill can land after the run committed its output and before the process exited: nothing of the
            // run is left over and the output is already the uninterrupted run's, file for file; a re-run would
            // refuse it as existing. Any other output left by the kill goes to the re-run, as before.
            let committed_first = !finished_first
                && left.is_empty()
                && dir.join(&out).is_dir()
                && differing_files(&reference_files, &tree_files(&dir.join(&out))?).is_empty();
            let left_by_kill = if finished_first {
                "finished before the kill".to_string()
            } else if committed_first {
                "nothing (output committed before the kill)".to_string()
            } else if left.is_empty() {
                "nothing".to_string()
            } else {
                left.join(", ")
            };
            let start = Instant::now();
            // A run that finished or committed before the kill is complete: its re-run would refuse the output.
            let complete = finished_first || committed_first;
            let stderr = if complete { String::new() } else { run_capturing(exe, &dir, &argv, &out)? };
            let rerun_s = start.elapsed().as_secs_f64();
            // What the re-run reported: a resume (train: "resumed after epoch N"; embed: "N reused" inputs) and
            // the stale partial output it removed.
            let reused = stderr
                .lines()
                .find(|l| l.contains(" reused, "))
                .and_then(|l| l.split(" reused").next())
                .and_then(|h| h.rsplit(' ').next())
                .and_then(|n| n.parse::<usize>().ok());
            let resumed = stderr.contains("resumed after epoch") || reused.is_some_and(|n| n > 0);
            let mut said = Vec::new();
            if resumed {
                said.push("resumed".to_string());
            }
            // A checkpoint left by the kill must be resumed from, not ignored.
            if left.iter().any(|l| l.contains(".checkpoint.")) && !resumed {
                failures.push(format!("{name} kill {k}: the re-run did not resume from the checkpoint the kill left"));
            }
            if stderr.contains("which is no longer running") {
                said.push("removed the stale partial output".to_string());
            }
            let after = leftovers(&dir.join("kill"), name)?;
            let files = tree_files(&dir.join(&out))?;
            let differing = differing_files(&reference_files, &files);
            if !after.is_empty() {
                failures.push(format!("{name} kill {k}: left behind after the re-run: {}", after.join(", ")));
            }
            if !differing.is_empty() {
                failures.push(format!(
                    "{name} kill {k}: output differs from the uninterrupted run: {}",
                    differing.join(", ")
                ));
            }
            rows.push(KillRow {
                command: name.to_string(),
                kill_at: format!("{:.1} s of {:.1} s", at.as_secs_f64(), full.as_secs_f64()),
                left_by_kill,
                rerun: if complete {
                    "not needed".to_string()
                } else if said.is_empty() {
                    format!("{rerun_s:.1} s")
                } else {
                    format!("{rerun_s:.1} s, {}", said.join(", "))
                },
                left_after: after.len(),
                identical: if differing.is_empty() {
                    format!("yes ({} files)", files.len())
                } else {
                    format!("NO: {}", differing.join(", "))
                },
            });
        }
    }
    // The annotation server: `bench annotate`'s crash check on SQLite, CI-sized.
    let annotate = crate::annotate::Args {
        annotators: 20,
        hits: vec![300],
        hit_size: 5,
        kill_at: 0.5,
        postgres: None,
        no_sqlite: false,
        servers: 1,
        seed: a.seed,
    };
    let td = tempfile::tempdir_in(work)?;
    let url = format!("sqlite://{}?mode=rwc", td.path().join("bench.sqlite").display());
    let o = crate::annotate::run_backend("sqlite", exe, &url, td.path(), 300, &annotate)?;
    if o.lost > 0 || o.duplicated > 0 || o.queue_errors > 0 {
        failures.push(format!(
            "annotate serve: {} answers lost, {} duplicated, {} queue errors",
            o.lost, o.duplicated, o.queue_errors
        ));
    }
    println!("\n## kill -9 and re-run (demo folder, seed {})\n", a.seed);
    println!(
        "| command | killed at | left by the kill | re-run | left after re-run | output = uninterrupted run |\n\
         |---|---|---|---|---:|---|"
    );
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.command, r.kill_at, r.left_by_kill, r.rerun, r.left_after, r.identical
        );
    }
    println!(
        "| annotate serve | at 50% of {} HITs ({} people) | – | restarted in {} | – | {} answers stored: {} lost, {} \
         duplicated |",
        o.hits,
        annotate.annotators,
        o.restart_seconds.map_or("–".into(), |s| format!("{s:.2} s")),
        o.stored,
        o.lost,
        o.duplicated
    );
    Ok(failures)
}

fn run_quiet(exe: &Path, dir: &Path, argv: &[String], out: &str) -> anyhow::Result<()> {
    let status =
        Command::new(exe).args(argv).args(["-q", "-o", out]).current_dir(dir).stdout(Stdio::null()).status()?;
    anyhow::ensure!(status.success(), "`stepwise {} -o {out}` failed ({status})", argv.join(" "));
    Ok(())
}

/// Run and return stderr (progress and summaries, where a resume is reported).
fn run_capturing(exe: &Path, dir: &Path, argv: &[String], out: &str) -> anyhow::Result<String> {
    let o = Command::new(exe).args(argv).args(["-o", out]).current_dir(dir).stdout(Stdio::null()).output()?;
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    anyhow::ensure!(o.status.success(), "`stepwise {} -o {out}` failed ({}): {stderr}", argv.join(" "), o.status);
    Ok(stderr)
}

/// Hidden entries beside `name`'s output in `parent` (unfinished outputs, checkpoints).
fn leftovers(parent: &Path, name: &str) -> anyhow::Result<Vec<String>> {
    let prefix = format!(".{name}.");
    let mut out = Vec::new();
    for e in std::fs::read_dir(parent)? {
        let n = e?.file_name().to_string_lossy().into_owned();
        if n.starts_with(&prefix) {
            out.push(n);
        }
    }
    out.sort();
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------------
// Part 3: hostile inputs

fn hostile(exe: &Path, work: &Path, a: &Args) -> anyhow::Result<Vec<String>> {
    let mut failures = Vec::new();
    // The fuzzer's findings, when this binary runs from its source tree (CI does), and a fuzzing corpus if given.
    let regressions =
        stepwise_core::paths::normalize(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions"));
    let regressions = regressions.is_dir().then_some(regressions);
    if let Some(corpus) = &a.fuzz_corpus
        && !corpus.is_dir()
    {
        usage_bail!(
            "--fuzz-corpus {}: not a folder (scripts/fuzz/fuzz.py keeps one in target/fuzz/work/corpus)",
            corpus.display()
        );
    }
    println!(
        "\n## Hostile inputs per reader (in process, through the fuzz targets)\n\nInputs: hand-made hostile files{}{}.\n",
        regressions.as_ref().map_or(" (no fuzz/regressions: not a source tree)".to_string(), |d| format!(
            ", the fuzzer's findings in {}",
            d.display()
        )),
        a.fuzz_corpus.as_ref().map_or(String::new(), |d| format!(", the fuzzing corpus in {}", d.display()))
    );
    println!(
        "| reader (fuzz target) | inputs | of them findings + corpus | accepted | refused (naming the file, where there is one) | panicked |\n|---|---:|---:|---:|---:|---:|"
    );
    // The fuzz targets panic on purpose; keep their messages off the table (the hook comes back on every way out).
    type Hook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;
    struct QuietPanics(Option<Hook>);
    impl Drop for QuietPanics {
        fn drop(&mut self) {
            if let Some(hook) = self.0.take() {
                std::panic::set_hook(hook);
            }
        }
    }
    let quiet = QuietPanics(Some(std::panic::take_hook()));
    std::panic::set_hook(Box::new(|_| {}));
    let mut total = [0usize; 5];
    let mut replayed_corpus = 0;
    for target in fuzz_targets::TARGETS {
        let mut inputs = hostile_inputs(target);
        let handmade = inputs.len();
        if let Some(r) = &regressions {
            inputs.extend(folder_inputs(&r.join(target))?);
        }
        if let Some(c) = &a.fuzz_corpus {
            let found = folder_inputs(&c.join(target))?;
            replayed_corpus += found.len();
            inputs.extend(found);
        }
        let (mut accepted, mut refused, mut panicked) = (0, 0, 0);
        for input in &inputs {
            match std::panic::catch_unwind(|| fuzz_targets::run(target, input)) {
                Ok(Ok(fuzz_targets::Verdict::Accepted)) => accepted += 1,
                Ok(Ok(fuzz_targets::Verdict::Refused(_))) => refused += 1,
                Ok(Err(e)) => anyhow::bail!("{target}: {e}"),
                Err(_) => panicked += 1,
            }
        }
        fuzz_targets::remove_scratch();
        let found = inputs.len() - handmade;
        println!("| {target} | {} | {found} | {accepted} | {refused} | {panicked} |", inputs.len());
        if panicked > 0 {
            failures.push(format!("{target}: {panicked} hostile inputs made the reader panic"));
        }
        for (t, v) in total.iter_mut().zip([inputs.len(), found, accepted, refused, panicked]) {
            *t += v;
        }
    }
    drop(quiet);
    println!("| **all** | {} | {} | {} | {} | {} |", total[0], total[1], total[2], total[3], total[4]);
    if a.fuzz_corpus.is_some() && replayed_corpus == 0 {
        failures.push("--fuzz-corpus: no inputs in any target's folder".to_string());
    }

    println!("\n## Resource bounds, end to end\n");
    println!(
        "| case | command | expected | exit | time | peak memory (bound) | output | message |\n|---|---|---|---:|---:|---:|---|---|"
    );
    let dir = work.join("hostile");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    for case in resource_cases(exe, &dir, a.long_line_mib)? {
        let r = run_measured(exe, &case.argv, Duration::from_secs(120))?;
        let written = case.output.as_ref().is_some_and(|o| {
            o.exists()
                || o.file_name().is_some_and(|n| leftovers(&dir, &n.to_string_lossy()).is_ok_and(|l| !l.is_empty()))
        });
        // A refusal explains itself on stderr; a skipped item in the output's failure list.
        let report = match (&case.expect, &case.output) {
            (Expect::ItemSkipped, Some(o)) => std::fs::read_to_string(o.join("failures.jsonl")).unwrap_or_default(),
            _ => r.stderr.clone(),
        };
        let message = report
            .lines()
            .find(|l| l.contains(&case.names))
            .or_else(|| report.lines().find(|l| l.starts_with("error")))
            .unwrap_or("")
            .to_string();
        let explained = message.contains(&case.names) && message.contains(case.says);
        let rest_done = match (&case.expect, &case.output, case.rest_done) {
            (Expect::ItemSkipped, Some(o), Some(id)) => {
                std::fs::read_to_string(o.join("ids")).is_ok_and(|ids| ids.lines().any(|l| l == id))
            }
            _ => true,
        };
        let within = r.peak_rss_mib <= case.max_peak_mib;
        let ok = !r.timed_out
            && explained
            && within
            && rest_done
            && match case.expect {
                Expect::Refused => r.exit == Some(2) && !written,
                Expect::ItemSkipped => r.exit == Some(0),
            };
        let shown = |t: &str| t.replace(&*dir.to_string_lossy(), "…").replace('|', "\\|");
        println!(
            "| {} | `stepwise {}` | {} | {} | {:.2} s | {:.0} MiB ({:.0}) | {} | {} |",
            case.name,
            shown(&case.argv.join(" ")),
            match case.expect {
                Expect::Refused => "refused: exit 2, nothing written",
                Expect::ItemSkipped => "the item skipped and listed in failures.jsonl, the rest embedded",
            },
            r.exit.map_or("killed".to_string(), |c| c.to_string()),
            r.seconds,
            r.peak_rss_mib,
            case.max_peak_mib,
            if written { "written" } else { "nothing" },
            shown(&message)
        );
        if !ok {
            failures.push(format!(
                "{}: exit {:?}, explained ({} named, \"{}\" said): {explained}, peak {:.0} MiB (bound {:.0}), the \
                 rest done: {rest_done}, output written: {written}, timed out: {}",
                case.name, r.exit, case.names, case.says, r.peak_rss_mib, case.max_peak_mib, r.timed_out
            ));
        }
    }
    Ok(failures)
}

/// The files of a folder, sorted by name (none when it does not exist).
fn folder_inputs(dir: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(anyhow::Error::new(e).context(dir.display().to_string())),
    };
    files.sort();
    files.iter().filter(|p| p.is_file()).map(|p| std::fs::read(p).with_context(|| p.display().to_string())).collect()
}

/// Hand-made hostile inputs for a reader: empty, binary noise, truncations of its seeds, wrong types, huge
/// claims. Each must be accepted or refused with an error naming the file, never a panic.
fn hostile_inputs(target: &str) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\xff\xfe\x00garbage\x00\x01".to_vec(),
        b"{".to_vec(),
        b"[".repeat(100_000),
        b"{\"a\":".repeat(10_000),
        b"null\n".to_vec(),
        b"\xef\xbb\xbf".to_vec(),
        vec![0u8; 4096],
    ];
    for (_, seed) in fuzz_targets::builtin_seeds(target).unwrap_or_default() {
        for cut in [1, seed.len() / 3, seed.len() / 2, seed.len().saturating_sub(1)] {
            out.push(seed[..cut.min(seed.len())].to_vec());
        }
        // Text formats: every number replaced by a huge one (sizes, counts, indices that claim too much). Binary
        // formats would only lose their framing this way; the fuzzer and the resource cases cover them.
        if std::str::from_utf8(&seed).is_ok() {
            out.push(replace_numbers(&seed, b"1000000000000"));
            out.push(replace_numbers(&seed, b"18446744073709551615"));
            out.push(replace_numbers(&seed, b"-1"));
        }
    }
    out
}

fn replace_numbers(bytes: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            out.extend_from_slice(with);
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// What a resource-bound case must end in.
enum Expect {
    /// Exit code 2, the file named, no output (not even a hidden unfinished one).
    Refused,
    /// A batch command: the bad item reported by name and skipped, the run completes.
    ItemSkipped,
}

struct ResourceCase {
    name: &'static str,
    argv: Vec<String>,
    /// The output the command would write (checked for absence when refused).
    output: Option<PathBuf>,
    /// What the message must name (the file, the line, the link)...
    names: String,
    /// ...and say: the bound that refused it, not some other error.
    says: &'static str,
    /// Peak resident memory allowed, MiB.
    max_peak_mib: f64,
    /// For a skipped item: an id the output must still hold.
    rest_done: Option<&'static str>,
    expect: Expect,
}

/// The files behind the resource-bound cases, written into `dir`.
fn resource_cases(exe: &Path, dir: &Path, long_line_mib: u64) -> anyhow::Result<Vec<ResourceCase>> {
    use std::io::Write;
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let out = |name: &str| dir.join(format!("{name}-out"));
    let mut cases = Vec::new();
    let tea =
        "{\"id\":\"p1\",\"title\":\"Tea\",\"steps\":[{\"text\":\"boil the water\"},{\"text\":\"steep the tea\"}]}\n";

    // A JSONL file whose first line is `long_line_mib` MiB (no newline): streamed, refused past 64 MiB.
    let long = dir.join("long-line.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&long)?);
        f.write_all(b"{\"id\":\"p\",\"title\":\"")?;
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..long_line_mib {
            f.write_all(&chunk)?;
        }
        f.flush()?;
    }
    cases.push(ResourceCase {
        name: "1-GB line",
        argv: vec!["ingest".into(), s(&long), "-o".into(), s(&out("long"))],
        output: Some(out("long")),
        names: "long-line.jsonl:1".into(),
        says: "the line is longer than 64 MiB",
        // The 64 MiB line bound, read into a buffer that grows by doubling, plus the program itself.
        max_peak_mib: 320.0,
        rest_done: None,
        expect: Expect::Refused,
    });

    // JSON nested a million deep.
    let deep = dir.join("deep.json");
    std::fs::write(&deep, format!("{{\"data\":{}{}}}", "[".repeat(1_000_000), "]".repeat(1_000_000)))?;
    cases.push(ResourceCase {
        name: "nesting a million deep",
        argv: vec!["ingest".into(), s(&deep), "--format".into(), "recipeqa".into(), "-o".into(), s(&out("deep"))],
        output: Some(out("deep")),
        names: "deep.json".into(),
        says: "recursion limit exceeded",
        max_peak_mib: 128.0,
        rest_done: None,
        expect: Expect::Refused,
    });

    // A real feature store whose vectors.npy then claims 10^6 x 10^6 = 10^12 elements.
    let words = dir.join("tea.jsonl");
    std::fs::write(&words, tea)?;
    let store = dir.join("huge-npy-store");
    let status =
        Command::new(exe).args(["-q", "embed", &s(&words), "--encoder", "tfidf", "-o", &s(&store)]).status()?;
    anyhow::ensure!(status.success(), "embedding the store for the 10^12-element case failed ({status})");
    let vectors = store.join("vectors.npy");
    let bytes = std::fs::read(&vectors)?;
    let header = stepwise_features::npy::parse_header(&vectors, &bytes)?;
    let mut huge = stepwise_features::npy::header_bytes(&[1_000_000, 1_000_000]);
    huge.extend_from_slice(&bytes[header.data_offset..]);
    std::fs::write(&vectors, huge)?;
    cases.push(ResourceCase {
        name: "10^12-element array",
        argv: vec!["neighbors".into(), s(&store), "--text".into(), "tea".into()],
        output: None,
        names: "vectors.npy".into(),
        says: "needs 4000000000128 bytes",
        max_peak_mib: 128.0,
        rest_done: None,
        expect: Expect::Refused,
    });

    // A PNG whose header claims 60,000 x 60,000 pixels, as the step image of a corpus being embedded.
    let bomb = dir.join("bomb-corpus");
    std::fs::create_dir_all(&bomb)?;
    std::fs::write(bomb.join("bomb.png"), stepwise_features::image_source::png_bomb(60_000))?;
    std::fs::write(bomb.join("ok.png"), {
        let img = stepwise_features::image::RgbImage::from_pixel(16, 16, stepwise_features::image::Rgb([9, 99, 199]));
        let mut png = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut png), stepwise_features::image::ImageFormat::Png)?;
        png
    })?;
    std::fs::write(
        bomb.join("procedures.jsonl"),
        "{\"id\":\"p1\",\"title\":\"Bomb\",\"steps\":[{\"text\":\"look\",\"images\":[\"bomb.png\"]},\
         {\"text\":\"and look\",\"images\":[\"ok.png\"]}]}\n",
    )?;
    cases.push(ResourceCase {
        name: "decompression bomb",
        argv: vec!["embed".into(), s(&bomb), "--encoder".into(), "descriptor".into(), "-o".into(), s(&out("bomb"))],
        output: Some(out("bomb")),
        names: "bomb.png".into(),
        says: "decompression bomb",
        max_peak_mib: 128.0,
        rest_done: Some("image:ok.png"),
        expect: Expect::ItemSkipped,
    });

    // A corpus folder whose task-set folder holds a link back to itself.
    let looped = dir.join("loop-corpus");
    std::fs::create_dir_all(looped.join(stepwise_core::corpus::TASKSET_DIR))?;
    std::fs::write(looped.join("procedures.jsonl"), tea)?;
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        looped.join(stepwise_core::corpus::TASKSET_DIR),
        looped.join(stepwise_core::corpus::TASKSET_DIR).join("again"),
    )?;
    cases.push(ResourceCase {
        name: "symlink loop",
        argv: vec!["clean".into(), s(&looped), "-o".into(), s(&out("loop"))],
        output: Some(out("loop")),
        names: "again".into(),
        says: "a symlink loop",
        max_peak_mib: 128.0,
        rest_done: None,
        expect: Expect::Refused,
    });
    Ok(cases)
}

struct Measured {
    exit: Option<i32>,
    seconds: f64,
    peak_rss_mib: f64,
    stderr: String,
    timed_out: bool,
}

/// Run `stepwise ARGV` with a time limit; its exit code, wall time, peak resident memory and stderr. The peak
/// is the child's VmHWM sampled every 5 ms until it exits (wait4's ru_maxrss would include the pages the child
/// shared with this process between fork and exec).
fn run_measured(exe: &Path, argv: &[String], limit: Duration) -> anyhow::Result<Measured> {
    let err_path = std::env::temp_dir().join(format!("stepwise-reliability-{}.stderr", std::process::id()));
    let err_file = std::fs::File::create(&err_path)?;
    let start = Instant::now();
    let child = Command::new(exe).args(argv).stdout(Stdio::null()).stderr(err_file).spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut timed_out = false;
    let mut peak_kib = 0.0f64;
    let status = loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        let mut status = 0;
        // SAFETY: `pid` is our child, not yet reaped (std's Child is never waited on below).
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break status;
        }
        anyhow::ensure!(r == 0, "waitpid: {}", std::io::Error::last_os_error());
        if start.elapsed() > limit && !timed_out {
            timed_out = true;
            // SAFETY: sending a signal to our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let seconds = start.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&err_path);
    std::mem::forget(child);
    Ok(Measured {
        exit: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        seconds,
        peak_rss_mib: peak_kib / 1024.0,
        stderr,
        timed_out,
    })
}

/// The peak resident set of a running process, from /proc (Linux); `None` once it has exited.
fn vm_hwm_kib(pid: libc::pid_t) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()
}
