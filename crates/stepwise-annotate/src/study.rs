//! A study on disk: what is shown, to how many people, under which rules. `stepwise annotate create` writes it;
//! the server and the exports read it. The database holds only what people did.
//!
//! Files of a study folder:
//! - `study.json`: the rules ([`StudyRules`]), the image root, the admin's password hash, the task list
//! - `instances.jsonl`: the sequencing instances shown (as `stepwise generate --task sequencing` wrote them)
//! - `admin-password.txt`: the admin password made at creation (owner-only permissions); delete it once noted
//! - `admin.hash`: its Argon2id hash (owner-only; kept apart so the other files are byte-identical for a seed)
//! - `annotations.sqlite`: the default database (created by `stepwise annotate serve`)

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use stepwise_core::output::write_string_atomic;
use stepwise_core::rng::rng_for;
use stepwise_core::sequencing::SequencingInstance;
use stepwise_core::{Error, IoResultExt, Result};

pub const STUDY_JSON: &str = "study.json";
pub const STUDY_INSTANCES: &str = "instances.jsonl";
pub const ADMIN_PASSWORD_FILE: &str = "admin-password.txt";
pub const ADMIN_HASH_FILE: &str = "admin.hash";
pub const SQLITE_FILE: &str = "annotations.sqlite";
/// The files of a study made from fresh randomness on purpose (secrets must not be reproducible from a seed):
/// every other file of a study folder is the same for the same inputs and seed.
pub const SECRET_FILES: &[&str] = &[ADMIN_PASSWORD_FILE, ADMIN_HASH_FILE];
/// Bumped when `study.json` changes incompatibly.
pub const STUDY_VERSION: u32 = 1;

/// What people are asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StudyKind {
    /// Put scrambled steps in order (the paper's human performance, §3.2).
    Ordering,
    /// See the steps in their authored order and add other orders that would also work (appendix B).
    Alternatives,
}

impl StudyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StudyKind::Ordering => "ordering",
            StudyKind::Alternatives => "alternatives",
        }
    }
}

/// What a step shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    Multimodal,
    Text,
    Image,
}

impl Modality {
    pub const ALL: [Modality; 3] = [Modality::Multimodal, Modality::Text, Modality::Image];

    pub fn as_str(self) -> &'static str {
        match self {
            Modality::Multimodal => "multimodal",
            Modality::Text => "text",
            Modality::Image => "image",
        }
    }

    pub fn parse(s: &str) -> Option<Modality> {
        Modality::ALL.into_iter().find(|m| m.as_str() == s)
    }

    pub fn shows_text(self) -> bool {
        self != Modality::Image
    }

    pub fn shows_images(self) -> bool {
        self != Modality::Text
    }
}

/// The study's rules; defaults follow the sequencing paper (§3.2, appendix B).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyRules {
    pub kind: StudyKind,
    pub modalities: Vec<Modality>,
    /// Items per HIT (the paper: 5).
    pub hit_size: usize,
    /// Judgements wanted per (instance, modality), each by a different person.
    pub judgements: usize,
    /// A person never sees one instance in two modalities within this many HITs; `None`: never.
    pub modality_gap: Option<u32>,
    /// Qualification items (known answers) every new person orders first; 0 = no qualification round.
    pub qualification_items: usize,
    /// Share of qualification items ordered exactly right (any reference) needed to enter the pool.
    pub qualification_threshold: f64,
    /// People whose accuracy (perfect-match ratio over their study items, any reference) falls below this are
    /// censored and their items re-queued (the paper: 20%); ordering studies only.
    pub censor_floor: f64,
    /// Judgements a person gives before the floor applies.
    pub censor_min_items: usize,
    /// An open assignment older than this stops holding its item for others (a person who left).
    pub assignment_timeout_minutes: u64,
    /// Order of the work queue and of the qualification items.
    pub seed: u64,
}

impl StudyRules {
    /// Whether people see step photos (a modality that shows them, or an alternative-order study).
    pub fn shows_images(&self) -> bool {
        self.kind == StudyKind::Alternatives || self.modalities.iter().any(|m| m.shows_images())
    }
}

impl Default for StudyRules {
    fn default() -> Self {
        StudyRules {
            kind: StudyKind::Ordering,
            modalities: vec![Modality::Multimodal, Modality::Text, Modality::Image],
            hit_size: 5,
            judgements: 3,
            modality_gap: None,
            qualification_items: 0,
            qualification_threshold: 0.6,
            censor_floor: 0.2,
            censor_min_items: 10,
            assignment_timeout_minutes: 60,
            seed: 0,
        }
    }
}

/// One unit of work: an instance shown in one modality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Index into the study's instances.
    pub instance: usize,
    pub modality: Modality,
    pub qualification: bool,
}

/// A study as stored in `study.json` plus its instances.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Study {
    pub version: u32,
    pub rules: StudyRules,
    /// Where item image paths are resolved from (absolute in memory; in `study.json` relative to the study folder,
    /// so a folder holding the study and its corpus can be moved or renamed whole); `None` when no item has images.
    pub image_root: Option<PathBuf>,
    /// Argon2id PHC string of the admin password (stored in `admin.hash`).
    #[serde(skip)]
    pub admin_password_hash: String,
    /// Tasks in queue order: qualification items first, then study items (seeded shuffle). A task's database id
    /// is its index + 1.
    pub tasks: Vec<TaskSpec>,
    #[serde(skip)]
    pub instances: Vec<SequencingInstance>,
}

impl Study {
    /// Make a study from sequencing instances. `image_root` resolves item image paths (every image must exist
    /// when a modality shows images). Returns the study and the admin password (made here, shown once).
    pub fn create(
        instances: Vec<SequencingInstance>,
        instances_path: &Path,
        image_root: Option<&Path>,
        rules: StudyRules,
    ) -> Result<(Study, String)> {
        check_rules(&rules)?;
        if instances.is_empty() {
            return Err(Error::Empty { path: instances_path.to_path_buf(), what: "no instances".into() });
        }
        if rules.qualification_items >= instances.len() {
            return Err(Error::usage(format!(
                "--qualification {} leaves no study items ({} instances)",
                rules.qualification_items,
                instances.len()
            )));
        }
        let shows_images = rules.shows_images();
        let mut any_image = false;
        for (line, inst) in instances.iter().enumerate() {
            let at = |field: String, message: String| {
                Error::field(
                    instances_path,
                    stepwise_core::Location::Line { line: line + 1, column: None },
                    field,
                    message,
                )
            };
            if inst.items.len() < 2 {
                return Err(at("items".into(), format!("instance {:?} has fewer than two items", inst.id)));
            }
            for (i, item) in inst.items.iter().enumerate() {
                let has_text = item.title.as_deref().is_some_and(|t| !t.trim().is_empty())
                    || item.text.as_deref().is_some_and(|t| !t.trim().is_empty());
                if rules.modalities.contains(&Modality::Text) && !has_text {
                    return Err(at(
                        format!("items[{i}]"),
                        format!("instance {:?}: the text modality needs a title or text on every item", inst.id),
                    ));
                }
                if rules.modalities.contains(&Modality::Image) && item.images.is_empty() {
                    return Err(at(
                        format!("items[{i}].images"),
                        format!(
                            "instance {:?}: the image modality needs an image on every item (make the instances \
                             with `stepwise generate --task sequencing --modality multimodal`)",
                            inst.id
                        ),
                    ));
                }
                for (k, img) in item.images.iter().enumerate() {
                    any_image = true;
                    if !shows_images {
                        continue;
                    }
                    let Some(root) = image_root else {
                        return Err(Error::usage(
                            "the instances have images: name the corpus they come from with --corpus",
                        ));
                    };
                    if !stepwise_core::paths::safe_relative(img) {
                        return Err(at(
                            format!("items[{i}].images[{k}]"),
                            format!("{img:?} is not a relative path inside the corpus"),
                        ));
                    }
                    let file = root.join(img);
                    if !file.is_file() {
                        return Err(at(
                            format!("items[{i}].images[{k}]"),
                            format!("image {} not found", file.display()),
                        ));
                    }
                }
            }
            if let Some(r) = inst.references.first() {
                stepwise_score::sequence_metrics::check_permutation(r, inst.items.len())
                    .map_err(|e| at("references[0]".into(), e.to_string()))?;
            } else {
                return Err(at("references".into(), format!("instance {:?} has no reference order", inst.id)));
            }
        }
        let mut order: Vec<usize> = (0..instances.len()).collect();
        order.shuffle(&mut rng_for(rules.seed, "annotate/queue"));
        let (qualification, study_items) = order.split_at(rules.qualification_items);
        // Qualification items are ordered in the study's first modality (a text-only study shows no photos).
        let qualification_modality = match rules.kind {
            StudyKind::Ordering => rules.modalities[0],
            StudyKind::Alternatives => Modality::Multimodal,
        };
        let mut tasks: Vec<TaskSpec> = qualification
            .iter()
            .map(|&instance| TaskSpec { instance, modality: qualification_modality, qualification: true })
            .collect();
        let modalities: Vec<Modality> = match rules.kind {
            StudyKind::Ordering => rules.modalities.clone(),
            StudyKind::Alternatives => vec![Modality::Multimodal],
        };
        // Queue: instance by instance (seeded order), each in every modality, so early HITs cover all modalities.
        for &instance in study_items {
            for &modality in &modalities {
                tasks.push(TaskSpec { instance, modality, qualification: false });
            }
        }
        let password = crate::auth::new_token(12);
        let admin_password_hash = crate::auth::hash_password(&password)?;
        let image_root = match image_root {
            Some(r) if any_image => Some(stepwise_core::paths::absolute_normalized(r)?),
            _ => None,
        };
        Ok((Study { version: STUDY_VERSION, rules, image_root, admin_password_hash, tasks, instances }, password))
    }

    /// Write `study.json`, `instances.jsonl` and `admin.hash` into `dir` (normally an `OutputDir` being built).
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_secret(&dir.join(ADMIN_HASH_FILE), &self.admin_password_hash)?;
        let mut on_disk = serde_json::to_value(self).map_err(|e| Error::runtime(e.to_string()))?;
        if let Some(root) = &self.image_root {
            on_disk["image_root"] = stepwise_core::paths::image_root_for(dir, root)?.into();
        }
        let json = serde_json::to_string_pretty(&on_disk).map_err(|e| Error::runtime(e.to_string()))?;
        write_string_atomic(&dir.join(STUDY_JSON), &(json + "\n"))?;
        let rows = self
            .instances
            .iter()
            .map(serde_json::to_value)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::runtime(e.to_string()))?;
        stepwise_core::json::write_jsonl_atomic(&dir.join(STUDY_INSTANCES), &rows)
    }

    /// Read a study folder.
    pub fn read(dir: &Path) -> Result<Study> {
        let path = dir.join(STUDY_JSON);
        if !path.is_file() {
            return Err(Error::bad_input(format!(
                "{}: not a study folder (no {STUDY_JSON}); make one with `stepwise annotate create`",
                dir.display()
            )));
        }
        let text = stepwise_core::json::read_text(&path)?;
        let mut study: Study = serde_json::from_str(&text).map_err(|e| Error::Syntax {
            path: path.clone(),
            location: stepwise_core::Location::Line { line: e.line(), column: Some(e.column()) },
            message: e.to_string(),
        })?;
        if study.version != STUDY_VERSION {
            return Err(Error::bad_input(format!(
                "{}: study version {} (this stepwise reads version {STUDY_VERSION})",
                path.display(),
                study.version
            )));
        }
        check_rules(&study.rules).map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?;
        // Relative to the study folder (studies written before that held an absolute path, which `join` keeps).
        if let Some(root) = &study.image_root {
            study.image_root = Some(stepwise_core::paths::absolute_normalized(&dir.join(root))?);
        }
        let hash_path = dir.join(ADMIN_HASH_FILE);
        study.admin_password_hash = stepwise_core::json::read_text(&hash_path)?.trim().to_string();
        if !study.admin_password_hash.starts_with("$argon2") {
            return Err(Error::bad_input(format!("{}: not an Argon2 password hash", hash_path.display())));
        }
        let instances_path = dir.join(STUDY_INSTANCES);
        study.instances = stepwise_score::predictions::read_instances(&instances_path)?;
        for (i, t) in study.tasks.iter().enumerate() {
            if t.instance >= study.instances.len() {
                return Err(Error::field(
                    &path,
                    stepwise_core::Location::Record(format!("tasks[{i}]")),
                    "instance",
                    format!("{} is out of range ({} instances)", t.instance, study.instances.len()),
                ));
            }
        }
        Ok(study)
    }

    /// The default database URL of a study folder (SQLite, created on first use).
    pub fn sqlite_url(dir: &Path) -> Result<String> {
        let file = stepwise_core::paths::absolute_normalized(&dir.join(SQLITE_FILE))?;
        Ok(format!("sqlite://{}?mode=rwc", file.display()))
    }

    /// Instance `i`'s gold orders (item indices).
    pub fn references(&self, instance: usize) -> &[Vec<usize>] {
        &self.instances[instance].references
    }

    /// Whether `order` puts instance `i`'s items in a valid order (any of its references, or any order satisfying
    /// its precedence constraints when the references are a sample).
    pub fn is_reference(&self, instance: usize, order: &[usize]) -> bool {
        self.instances[instance].is_valid_order(order)
    }

    /// Before serving: every photo the study shows is under its image root (a study folder copied without its
    /// corpus is told here, not by broken pictures in people's browsers).
    pub fn check_images(&self, dir: &Path) -> Result<()> {
        if !self.rules.shows_images() {
            return Ok(());
        }
        let paths = self.image_paths();
        if paths.is_empty() {
            return Ok(());
        }
        let study_json = dir.join(STUDY_JSON);
        let Some(root) = &self.image_root else {
            return Err(Error::bad_input(format!(
                "{}: the instances have step photos but the study names no image_root",
                study_json.display()
            )));
        };
        let missing: Vec<&&str> = paths.iter().filter(|p| !root.join(p).is_file()).collect();
        if let Some(example) = missing.first() {
            return Err(Error::bad_input(format!(
                "{}: {} of {} step photos are not under image_root {}, e.g. {example} (a relative image_root is \
                 resolved against the study folder: was the study moved or copied without its corpus? Write the \
                 corpus's absolute path into image_root to serve it from elsewhere)",
                study_json.display(),
                missing.len(),
                paths.len(),
                root.display()
            )));
        }
        Ok(())
    }

    /// Every image path the study may serve (nothing else is ever read from the image root).
    pub fn image_paths(&self) -> BTreeSet<&str> {
        self.instances.iter().flat_map(|i| i.items.iter()).flat_map(|it| it.images.iter().map(String::as_str)).collect()
    }
}

/// Write the admin password next to the study, readable by its owner only.
pub fn write_admin_password(dir: &Path, password: &str) -> Result<PathBuf> {
    let path = dir.join(ADMIN_PASSWORD_FILE);
    write_secret(&path, password)?;
    Ok(path)
}

/// A one-line file readable by its owner only (permissions set before the secret is written).
fn write_secret(path: &Path, secret: &str) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path).at(path)?;
    writeln!(f, "{secret}").at(path)?;
    f.sync_all().at(path)
}

fn check_rules(r: &StudyRules) -> Result<()> {
    let bad = |m: String| Err(Error::usage(m));
    if r.modalities.is_empty() {
        return bad("--modalities: name at least one of multimodal, text, image".into());
    }
    let distinct: BTreeSet<_> = r.modalities.iter().collect();
    if distinct.len() != r.modalities.len() {
        return bad("--modalities: a modality is named twice".into());
    }
    if !(1..=50).contains(&r.hit_size) {
        return bad(format!("--hit-size {}: must be between 1 and 50", r.hit_size));
    }
    if !(1..=100).contains(&r.judgements) {
        return bad(format!("--judgements {}: must be between 1 and 100", r.judgements));
    }
    for (name, v) in [("--qualification-threshold", r.qualification_threshold), ("--censor-floor", r.censor_floor)] {
        if !(0.0..=1.0).contains(&v) {
            return bad(format!("{name} {v}: must be a share between 0 and 1"));
        }
    }
    if r.assignment_timeout_minutes == 0 {
        return bad("--assignment-timeout: must be at least 1 minute".into());
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use stepwise_core::sequencing::SequencingItem;

    pub(crate) fn instance(id: &str, n: usize) -> SequencingInstance {
        SequencingInstance {
            constraints: None,
            id: id.into(),
            procedure: format!("proc-{id}"),
            split: "test".into(),
            modality: "text".into(),
            items: (0..n)
                .map(|i| SequencingItem { step: i, title: None, text: Some(format!("step {i}")), images: vec![] })
                .collect(),
            references: vec![(0..n).rev().collect()],
        }
    }

    fn text_rules() -> StudyRules {
        StudyRules { modalities: vec![Modality::Text], ..StudyRules::default() }
    }

    #[test]
    fn queue_holds_every_instance_in_every_modality_after_the_qualification_items() {
        let inst: Vec<_> = (0..6).map(|i| instance(&format!("i{i}"), 4)).collect();
        let rules = StudyRules {
            modalities: vec![Modality::Text, Modality::Multimodal],
            qualification_items: 2,
            ..StudyRules::default()
        };
        // Multimodal needs images: refused with the item named.
        let e = Study::create(inst.clone(), Path::new("x.jsonl"), None, rules.clone());
        assert!(e.is_ok(), "multimodal with text only items is allowed (images shown when present)");
        let (study, password) = Study::create(inst, Path::new("x.jsonl"), None, rules).unwrap();
        assert!(password.len() >= 16);
        assert!(study.tasks[..2].iter().all(|t| t.qualification));
        assert_eq!(study.tasks.len(), 2 + 4 * 2);
        let q: BTreeSet<usize> = study.tasks[..2].iter().map(|t| t.instance).collect();
        assert!(study.tasks[2..].iter().all(|t| !q.contains(&t.instance)), "qualification items are not re-asked");
        assert!(crate::auth::verify_password(&study.admin_password_hash, &password));
    }

    /// An annotator's order is judged exact when it is valid, also when the references are only a sample of the
    /// valid orders (then by the instance's precedence constraints).
    #[test]
    fn a_valid_order_outside_sampled_references_is_exact() {
        let mut sampled = instance("s", 4);
        // Items 3 → 2 and 1 → 0; the sample keeps the authored order only.
        sampled.constraints = Some(vec![[3, 2], [1, 0]]);
        let (study, _) =
            Study::create(vec![sampled, instance("full", 4)], Path::new("x.jsonl"), None, text_rules()).unwrap();
        assert!(study.is_reference(0, &[3, 2, 1, 0]) && study.is_reference(0, &[1, 3, 0, 2]));
        assert!(!study.is_reference(0, &[2, 3, 1, 0]), "breaks 3 → 2");
        assert!(study.is_reference(1, &[3, 2, 1, 0]) && !study.is_reference(1, &[1, 3, 0, 2]), "no constraints");
    }

    #[test]
    fn bad_instances_and_rules_are_refused_with_the_field() {
        let mut one = instance("a", 3);
        one.items[1].text = None;
        let e = Study::create(vec![one, instance("b", 3)], Path::new("s.jsonl"), None, text_rules()).unwrap_err();
        assert!(e.to_string().contains("s.jsonl:1") && e.to_string().contains("items[1]"), "{e}");
        let e = Study::create(
            vec![instance("a", 3)],
            Path::new("s.jsonl"),
            None,
            StudyRules { modalities: vec![Modality::Image], ..text_rules() },
        )
        .unwrap_err();
        assert!(e.to_string().contains("items[0].images"), "{e}");
        let e = Study::create(
            vec![instance("a", 3)],
            Path::new("s.jsonl"),
            None,
            StudyRules { hit_size: 0, ..text_rules() },
        )
        .unwrap_err();
        assert!(e.to_string().contains("--hit-size"), "{e}");
        let mut img = instance("a", 3);
        img.items[0].images = vec!["../../etc/passwd".into()];
        let td = tempfile::tempdir().unwrap();
        let e = Study::create(vec![img], Path::new("s.jsonl"), Some(td.path()), StudyRules::default()).unwrap_err();
        assert!(e.to_string().contains("not a relative path"), "{e}");
    }

    #[test]
    fn study_round_trips_through_its_folder() {
        let td = tempfile::tempdir().unwrap();
        let (study, _) =
            Study::create((0..3).map(|i| instance(&format!("i{i}"), 3)).collect(), Path::new("x"), None, text_rules())
                .unwrap();
        study.write(td.path()).unwrap();
        let back = Study::read(td.path()).unwrap();
        assert_eq!(back.tasks, study.tasks);
        assert_eq!(back.instances, study.instances);
        assert_eq!(back.rules, study.rules);
        // Images are found from the study folder: the folder holding study and corpus moves whole.
        let run = td.path().join("run");
        std::fs::create_dir_all(run.join("corpus/images")).unwrap();
        std::fs::write(run.join("corpus/images/a.png"), b"png").unwrap();
        let mut with_image = instance("m", 3);
        for item in &mut with_image.items {
            item.images = vec!["images/a.png".into()];
        }
        let rules = StudyRules { modalities: vec![Modality::Multimodal], ..StudyRules::default() };
        let (study, _) =
            Study::create(vec![with_image, instance("n", 3)], Path::new("x"), Some(&run.join("corpus")), rules)
                .unwrap();
        std::fs::create_dir_all(run.join("study")).unwrap();
        study.write(&run.join("study")).unwrap();
        let text = std::fs::read_to_string(run.join("study").join(STUDY_JSON)).unwrap();
        assert!(text.contains("\"image_root\": \"../corpus\""), "{text}");
        std::fs::rename(&run, td.path().join("moved")).unwrap();
        let back = Study::read(&td.path().join("moved/study")).unwrap();
        assert_eq!(back.image_root.as_deref(), Some(td.path().join("moved/corpus").as_path()));
        back.check_images(&td.path().join("moved/study")).unwrap();
        // The study folder alone, away from its corpus, is refused before serving, naming the file and the root.
        std::fs::rename(td.path().join("moved/study"), td.path().join("alone")).unwrap();
        let alone = Study::read(&td.path().join("alone")).unwrap();
        let e = alone.check_images(&td.path().join("alone")).unwrap_err().to_string();
        assert!(
            e.contains("alone/study.json") && e.contains("1 of 1 step photos") && e.contains("images/a.png"),
            "{e}"
        );
        std::fs::write(td.path().join(STUDY_JSON), "{\"version\": 1,").unwrap();
        let e = Study::read(td.path()).unwrap_err().to_string();
        assert!(e.contains("study.json:1"), "{e}");
    }
}
