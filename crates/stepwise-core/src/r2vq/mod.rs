//! R2VQ recipes (Pustejovsky et al., SemEval-2022 Task 9) in the task's CoNLL-U-like layout: one token per line
//! with 20 tab-separated columns (the organisers' README.txt): ID, FORM, LEMMA, UPOS, ENTITY, PART, RES, HIDDEN,
//! COREF, PREDICATE, ARG1–ARG10.
//!
//! The types keep everything the file says, in its order (header comments, blank lines, the final newline), so
//! [`R2vqDocument::write_conllu`] gives back the bytes read for files written in the canonical spelling (the shared
//! SemEval files round-trip exactly; an acceptance test checks it). The reader lives in `stepwise-ingest`.
//!
//! - [`graph`]: the recipe's annotation as a graph (mentions, events with their participants, results, hidden
//!   arguments and semantic roles, coreference chains) — what question programs run on

use std::fmt;
use std::io::Write;

pub mod answer_match;
pub mod graph;

pub use graph::{AnnotationGraph, Event, Mention, RoleSpan, SentenceRef};

/// The 20 columns, in order.
pub const COLUMNS: [&str; 20] = [
    "ID",
    "FORM",
    "LEMMA",
    "UPOS",
    "ENTITY",
    "PART",
    "RES",
    "HIDDEN",
    "COREF",
    "PREDICATE",
    "ARG1",
    "ARG2",
    "ARG3",
    "ARG4",
    "ARG5",
    "ARG6",
    "ARG7",
    "ARG8",
    "ARG9",
    "ARG10",
];

/// Semantic-role columns per sentence (one per predicate, ARG1–ARG10).
pub const ARG_COLUMNS: usize = 10;

/// A file of recipes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct R2vqDocument {
    pub recipes: Vec<R2vqRecipe>,
    /// Whether the file ends with a newline (the shared train sample does not).
    pub final_newline: bool,
}

/// One recipe (`# newdoc id = ...`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct R2vqRecipe {
    pub id: String,
    /// The comment lines between `# newdoc` and the first paragraph, in file order.
    pub header: Vec<HeaderLine>,
    /// The ingredient list (`<id>::ingredients`) and the steps (`<id>::stepNN`), in file order.
    pub paragraphs: Vec<Paragraph>,
}

/// A comment line of a recipe's header.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderLine {
    /// `# question 4-2 = ...`
    Question { id: QuestionId, text: String },
    /// `# answer 4-2 = ...` (train files only)
    Answer { id: QuestionId, text: String },
    /// `# metadata:url = ...`, `# metadata:num_steps = ...`, ...
    Metadata { key: String, value: String },
    /// Any other comment, kept verbatim (without the newline).
    Other(String),
}

/// A question id `<family>-<index>`: the family number (0 counting ... 18 unanswerable, see ../shared/data's
/// R2VQ provenance) and the question's index within the family for this recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuestionId {
    pub family: u32,
    pub index: u32,
}

impl fmt::Display for QuestionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.family, self.index)
    }
}

impl std::str::FromStr for QuestionId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (f, i) = s.split_once('-').ok_or_else(|| format!("question id {s:?} is not <family>-<index>"))?;
        let num = |x: &str| canonical_number(x).ok_or_else(|| format!("question id {s:?} is not <family>-<index>"));
        Ok(QuestionId { family: num(f)?, index: num(i)? })
    }
}

/// The question families of the SemEval-2022 Task 9 release, by the number before the dash of a question id
/// (labels after the templates and samsungnlp's question classifier; ../shared/data's R2VQ provenance lists them
/// with the test split's counts), and stepwise's object-orientation family (19), which the release does not ask.
pub const FAMILIES: [&str; 20] = [
    "cardinality",
    "ellipsis",
    "implicit argument",
    "object lifespan",
    "event ordering",
    "SRL result",
    "SRL instrument / co-agent",
    "SRL time",
    "SRL location",
    "SRL extent",
    "SRL attribute / manner",
    "SRL result / purpose",
    "SRL destination / co-patient",
    "SRL co-patient / co-theme",
    "SRL goal",
    "SRL purpose",
    "SRL source",
    "location change",
    "unanswerable",
    "object orientation",
];

/// The sentence metadata key of prop orientations (a stepwise extension of the layout, kept as a comment line):
/// `# metadata:orientation = 6=not_upright 9=upright`, the token ID of a prop mention and its orientation.
pub const ORIENTATION_KEY: &str = "orientation";

/// "program 12 · text 3 · unanswerable 1": questions per answering route (`stepwise r2vq answer`'s `route`).
pub fn routes_text<'a>(routes: impl IntoIterator<Item = (&'a str, usize)>) -> String {
    routes.into_iter().map(|(r, n)| format!("{} {n}", r.replace('_', " "))).collect::<Vec<_>>().join(" · ")
}

/// A family's name, or `family N` for a number the release does not use.
pub fn family_name(family: u32) -> String {
    FAMILIES.get(family as usize).map_or_else(|| format!("family {family}"), |n| n.to_string())
}

/// A question with its answer when the file has one.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionAnswer {
    pub id: QuestionId,
    pub question: String,
    /// The first `# answer` line of the question.
    pub answer: Option<String>,
    /// Further `# answer` lines with the same id: other correct answers (the official scorer takes the best
    /// match over a question's gold answers; converted releases with several correct answers write them so).
    pub alternatives: Vec<String>,
}

/// A paragraph: the ingredient list or one step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Paragraph {
    /// `<recipe>::ingredients` or `<recipe>::stepNN`.
    pub id: String,
    pub sentences: Vec<Sentence>,
}

impl Paragraph {
    /// The 1-based step number of a `::stepNN` paragraph; `None` for the ingredient list.
    pub fn step_number(&self) -> Option<u32> {
        let tail = self.id.rsplit("::").next()?;
        tail.strip_prefix("step")?.parse().ok()
    }

    /// The sentences' texts joined by spaces.
    pub fn text(&self) -> String {
        self.sentences.iter().filter(|s| !s.continues).map(|s| s.text.as_str()).collect::<Vec<_>>().join(" ")
    }
}

/// A sentence with its tokens.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sentence {
    /// `<recipe>::<paragraph>::sentNN`.
    pub id: String,
    pub text: String,
    /// `# metadata:<key> = <value>` lines after `# text` (`stop_sent = STEP` marks a step number such as "1."
    /// that the splitter made a sentence of).
    pub metadata: Vec<(String, String)>,
    pub tokens: Vec<Token>,
    /// Blank lines after the tokens (1 between sentences, 2 at the end of a recipe in the SemEval files).
    pub blank_lines_after: usize,
    /// A group of tokens after a blank line with no `# sent_id`/`# text` lines of its own, numbered from 1 again
    /// (ten in the SemEval test file, where the tokenizer split a sentence after an abbreviation such as
    /// "tbls."): it shares the previous sentence's id and text, which are not written again.
    pub continues: bool,
}

/// One token line (its ID is its 1-based position in the sentence).
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub form: String,
    pub lemma: String,
    pub upos: String,
    pub entity: EntityTag,
    /// PART: the ID of the event head this entity participates in.
    pub part: Option<usize>,
    /// RES: the ID of the event head this entity is the result of.
    pub res: Option<usize>,
    /// HIDDEN: the event's unmentioned arguments (only on event heads).
    pub hidden: Vec<HiddenArg>,
    /// COREF: the entity's coreference id (on the first token of an entity).
    pub coref: Option<EntityRef>,
    /// PREDICATE: the VerbAtlas frame when the token is a predicate.
    pub predicate: Option<String>,
    /// ARG1–ARG10: this token's role for each predicate of the sentence, in predicate order.
    pub args: [SrlTag; ARG_COLUMNS],
}

impl Token {
    /// A token with only its form (lemma: the form in lower case; every other column empty), for layouts that
    /// have no lemmas or tags of their own.
    pub fn plain(form: &str) -> Token {
        Token {
            form: form.to_string(),
            lemma: form.to_lowercase(),
            upos: "_".into(),
            entity: EntityTag::Outside,
            part: None,
            res: None,
            hidden: Vec::new(),
            coref: None,
            predicate: None,
            args: Default::default(),
        }
    }
}

/// The cooking-entity types of the ENTITY column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityKind {
    Event,
    Habitat,
    Tool,
    ExplicitIngredient,
    ImplicitIngredient,
}

impl EntityKind {
    pub const ALL: [EntityKind; 5] = [
        EntityKind::Event,
        EntityKind::Habitat,
        EntityKind::Tool,
        EntityKind::ExplicitIngredient,
        EntityKind::ImplicitIngredient,
    ];

    /// The spelling in the ENTITY column.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Event => "EVENT",
            EntityKind::Habitat => "HABITAT",
            EntityKind::Tool => "TOOL",
            EntityKind::ExplicitIngredient => "EXPLICITINGREDIENT",
            EntityKind::ImplicitIngredient => "IMPLICITINGREDIENT",
        }
    }
}

/// The ENTITY column: `_` (not annotated, e.g. the ingredient list), `O`, or `B-`/`I-` and a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntityTag {
    Unannotated,
    Outside,
    Begin(EntityKind),
    Inside(EntityKind),
}

impl fmt::Display for EntityTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntityTag::Unannotated => f.write_str("_"),
            EntityTag::Outside => f.write_str("O"),
            EntityTag::Begin(k) => write!(f, "B-{}", k.as_str()),
            EntityTag::Inside(k) => write!(f, "I-{}", k.as_str()),
        }
    }
}

impl std::str::FromStr for EntityTag {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "_" => return Ok(EntityTag::Unannotated),
            "O" => return Ok(EntityTag::Outside),
            _ => {}
        }
        let kind = |name: &str| EntityKind::ALL.into_iter().find(|k| k.as_str() == name);
        let known = || EntityKind::ALL.map(EntityKind::as_str).join(", ");
        match (s.strip_prefix("B-"), s.strip_prefix("I-")) {
            (Some(k), _) => kind(k).map(EntityTag::Begin),
            (_, Some(k)) => kind(k).map(EntityTag::Inside),
            _ => None,
        }
        .ok_or_else(|| format!("{s:?} is not _, O or B-/I- followed by one of {}", known()))
    }
}

/// The roles of the HIDDEN column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HiddenRole {
    /// A syntactically elided argument ("Simmer [the onions] until browned").
    Drop,
    /// A semantically elided ingredient (the water in "cook pasta in a large pot").
    Shadow,
    Tool,
    Habitat,
    /// The unnamed result of the event ("mixture").
    Result,
}

impl HiddenRole {
    pub const ALL: [HiddenRole; 5] =
        [HiddenRole::Drop, HiddenRole::Shadow, HiddenRole::Tool, HiddenRole::Habitat, HiddenRole::Result];

    pub fn as_str(self) -> &'static str {
        match self {
            HiddenRole::Drop => "Drop",
            HiddenRole::Shadow => "Shadow",
            HiddenRole::Tool => "Tool",
            HiddenRole::Habitat => "Habitat",
            HiddenRole::Result => "Result",
        }
    }
}

/// One `Role=value:value` item of the HIDDEN column.
#[derive(Debug, Clone, PartialEq)]
pub struct HiddenArg {
    pub role: HiddenRole,
    pub values: Vec<EntityRef>,
}

/// An entity reference `lemma.step.sentence.token` (COREF column, HIDDEN values), or a bare name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityRef {
    /// The lemma with `_` for spaces, e.g. `olive_oil` (may itself contain dots).
    pub name: String,
    /// Where the entity is first mentioned (1-based step, sentence, token).
    pub at: Option<TokenPos>,
}

/// A 1-based (step, sentence, token) position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenPos {
    pub step: u32,
    pub sentence: u32,
    pub token: u32,
}

impl fmt::Display for EntityRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(p) = self.at {
            write!(f, ".{}.{}.{}", p.step, p.sentence, p.token)?;
        }
        Ok(())
    }
}

impl EntityRef {
    /// A reference named by free text (a name from another layout). Whitespace and the HIDDEN column's
    /// separators (`|`, `:`, `=`) become `_`, and so do the dots of an unplaced name (a trailing `.N.N.N` would read
    /// back as a position); an empty name is `unnamed`. Written and read back, it is the same reference.
    pub fn named(name: &str, at: Option<TokenPos>) -> EntityRef {
        let mut name: String = name
            .trim()
            .chars()
            .map(|c| if c.is_whitespace() || "|:=".contains(c) || (at.is_none() && c == '.') { '_' } else { c })
            .collect();
        if name.chars().all(|c| c == '_') {
            name = "unnamed".into();
        }
        EntityRef { name, at }
    }
}

impl std::str::FromStr for EntityRef {
    type Err = String;

    /// The position is the last three dot-separated numbers; a value without them is a bare name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err("empty entity reference".into());
        }
        let parts: Vec<&str> = s.rsplitn(4, '.').collect();
        if let [tok, sent, step, name] = parts.as_slice()
            && let (Some(step), Some(sentence), Some(token)) =
                (canonical_number(step), canonical_number(sent), canonical_number(tok))
        {
            return Ok(EntityRef { name: name.to_string(), at: Some(TokenPos { step, sentence, token }) });
        }
        Ok(EntityRef { name: s.to_string(), at: None })
    }
}

/// A semantic-role column value: `_`, or `B-`/`I-`/`D-` and a role (`V` marks the predicate itself; `D-V` the
/// non-adjacent parts of a multi-word predicate).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SrlTag {
    #[default]
    Empty,
    Begin(String),
    Inside(String),
    Discontinuous(String),
}

impl SrlTag {
    /// The role name, if any.
    pub fn role(&self) -> Option<&str> {
        match self {
            SrlTag::Empty => None,
            SrlTag::Begin(r) | SrlTag::Inside(r) | SrlTag::Discontinuous(r) => Some(r),
        }
    }
}

impl fmt::Display for SrlTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SrlTag::Empty => f.write_str("_"),
            SrlTag::Begin(r) => write!(f, "B-{r}"),
            SrlTag::Inside(r) => write!(f, "I-{r}"),
            SrlTag::Discontinuous(r) => write!(f, "D-{r}"),
        }
    }
}

impl std::str::FromStr for SrlTag {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "_" {
            return Ok(SrlTag::Empty);
        }
        let role = |r: &str| -> Result<String, String> {
            if r.is_empty() || r.contains(char::is_whitespace) {
                Err(format!("{s:?} has no role name"))
            } else {
                Ok(r.to_string())
            }
        };
        if let Some(r) = s.strip_prefix("B-") {
            Ok(SrlTag::Begin(role(r)?))
        } else if let Some(r) = s.strip_prefix("I-") {
            Ok(SrlTag::Inside(role(r)?))
        } else if let Some(r) = s.strip_prefix("D-") {
            Ok(SrlTag::Discontinuous(role(r)?))
        } else {
            Err(format!("{s:?} is not _ or B-/I-/D- followed by a role"))
        }
    }
}

/// A decimal number written without sign or leading zeros (so that writing it back gives the same text).
pub fn canonical_number(s: &str) -> Option<u32> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical { s.parse().ok() } else { None }
}

/// A word of the inline-tagged layout (HIT-QMUL's train recipes; what `stepwise r2vq tag` predicts) with the
/// annotation written after it: its ENTITY tag (EVENT, TOOL), the event it takes part in (by the event's words),
/// and, on events, the hidden arguments.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InlineToken {
    pub form: String,
    pub entity: Option<EntityTag>,
    pub participant: Option<String>,
    pub hidden: Vec<HiddenArg>,
}

/// A step in the inline-tagged layout: each word, then its groups (`( result : x # tool : y )`, `( entity :
/// B-EVENT )`, `( participant : v )`); hidden values are separated by ` , `, their names with spaces.
pub fn inline_step_string(tokens: &[InlineToken]) -> String {
    let mut out = Vec::new();
    for t in tokens {
        out.push(t.form.clone());
        if !t.hidden.is_empty() {
            let groups: Vec<String> = t
                .hidden
                .iter()
                .map(|h| {
                    let values: Vec<String> = h.values.iter().map(|v| v.name.replace('_', " ")).collect();
                    format!("{} : {}", h.role.as_str().to_lowercase(), values.join(" , "))
                })
                .collect();
            out.push(format!("( {} )", groups.join(" # ")));
        }
        if let Some(e) = t.entity {
            out.push(format!("( entity : {e} )"));
        }
        if let Some(p) = &t.participant {
            out.push(format!("( participant : {p} )"));
        }
    }
    out.join(" ")
}

/// An annotation layer of the SemEval layout. Layouts that lack one leave its columns empty (the inline-tagged
/// train recipes carry the cooking roles but no semantic roles; raw text carries neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// ENTITY, PART, RES, HIDDEN and COREF: cooking events, their participants, results, tools and habitats.
    CookingRoles,
    /// PREDICATE and ARG1–ARG10: VerbAtlas frames and their semantic roles.
    SemanticRoles,
}

impl R2vqRecipe {
    /// Whether any token of the recipe carries the layer.
    pub fn has_layer(&self, layer: Layer) -> bool {
        let mut tokens = self.paragraphs.iter().flat_map(|p| &p.sentences).flat_map(|s| &s.tokens);
        match layer {
            Layer::CookingRoles => tokens.any(|t| {
                matches!(t.entity, EntityTag::Begin(_) | EntityTag::Inside(_))
                    || t.part.is_some()
                    || t.res.is_some()
                    || !t.hidden.is_empty()
                    || t.coref.is_some()
            }),
            Layer::SemanticRoles => tokens.any(|t| t.predicate.is_some() || t.args.iter().any(|a| *a != SrlTag::Empty)),
        }
    }

    /// The questions of the header, each with its answer when there is one (question order).
    pub fn questions(&self) -> Vec<QuestionAnswer> {
        let mut out: Vec<QuestionAnswer> = Vec::new();
        for line in &self.header {
            if let HeaderLine::Question { id, text } = line {
                out.push(QuestionAnswer { id: *id, question: text.clone(), answer: None, alternatives: Vec::new() });
            }
        }
        for line in &self.header {
            if let HeaderLine::Answer { id, text } = line
                && let Some(q) = out.iter_mut().find(|q| q.id == *id)
            {
                match q.answer {
                    None => q.answer = Some(text.clone()),
                    Some(_) => q.alternatives.push(text.clone()),
                }
            }
        }
        out
    }

    /// A metadata value (`url`, `num_steps`, ...).
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.header.iter().find_map(|l| match l {
            HeaderLine::Metadata { key: k, value } if k == key => Some(value.as_str()),
            _ => None,
        })
    }

    /// The step paragraphs (not the ingredient list), in order.
    pub fn steps(&self) -> impl Iterator<Item = &Paragraph> {
        self.paragraphs.iter().filter(|p| p.step_number().is_some())
    }

    /// The ingredient list's lines.
    pub fn ingredient_lines(&self) -> Vec<&str> {
        self.paragraphs
            .iter()
            .filter(|p| p.id.ends_with("::ingredients"))
            .flat_map(|p| p.sentences.iter().filter(|s| !s.continues).map(|s| s.text.as_str()))
            .collect()
    }
}

impl Token {
    /// The 20 column values as written (ID first).
    pub fn columns(&self, id: usize) -> [String; 20] {
        let opt = |x: Option<usize>| x.map_or_else(|| "_".to_string(), |v| v.to_string());
        let hidden = if self.hidden.is_empty() {
            "_".to_string()
        } else {
            self.hidden
                .iter()
                .map(|h| {
                    let values: Vec<String> = h.values.iter().map(|v| v.to_string()).collect();
                    format!("{}={}", h.role.as_str(), values.join(":"))
                })
                .collect::<Vec<_>>()
                .join("|")
        };
        let fixed = [
            id.to_string(),
            self.form.clone(),
            self.lemma.clone(),
            self.upos.clone(),
            self.entity.to_string(),
            opt(self.part),
            opt(self.res),
            hidden,
            self.coref.as_ref().map_or_else(|| "_".to_string(), |c| c.to_string()),
            self.predicate.clone().unwrap_or_else(|| "_".to_string()),
        ];
        std::array::from_fn(|i| if i < 10 { fixed[i].clone() } else { self.args[i - 10].to_string() })
    }
}

impl R2vqDocument {
    /// Split by recipe: (to fit on, held out). A seeded draw of `share` of the recipes is held out (at least one,
    /// at most all but one when there are two or more); both parts keep file order.
    pub fn split_by_recipe(&self, share: f64, seed: u64) -> (R2vqDocument, R2vqDocument) {
        use rand::seq::SliceRandom;
        let n = self.recipes.len();
        let want = ((share * n as f64).round() as usize).clamp(usize::from(n > 0), n.saturating_sub(1).max(1));
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut crate::rng::rng_for(seed, "r2vq-split"));
        let held: std::collections::BTreeSet<usize> = order.into_iter().take(want).collect();
        let part = |keep: bool| R2vqDocument {
            recipes: self
                .recipes
                .iter()
                .enumerate()
                .filter(|(i, _)| held.contains(i) != keep)
                .map(|(_, r)| r.clone())
                .collect(),
            final_newline: true,
        };
        (part(true), part(false))
    }

    /// Write the document in the SemEval layout.
    pub fn write_conllu<W: Write>(&self, w: &mut W) -> std::io::Result<()> {
        let mut text = String::new();
        for r in &self.recipes {
            text.push_str(&format!("# newdoc id = {}\n", r.id));
            for line in &r.header {
                match line {
                    HeaderLine::Question { id, text: t } => text.push_str(&format!("# question {id} = {t}\n")),
                    HeaderLine::Answer { id, text: t } => text.push_str(&format!("# answer {id} = {t}\n")),
                    HeaderLine::Metadata { key, value } => text.push_str(&format!("# metadata:{key} = {value}\n")),
                    HeaderLine::Other(raw) => {
                        text.push_str(raw);
                        text.push('\n');
                    }
                }
            }
            for p in &r.paragraphs {
                text.push_str(&format!("# newpar id = {}\n", p.id));
                for s in &p.sentences {
                    if !s.continues {
                        text.push_str(&format!("# sent_id = {}\n# text = {}\n", s.id, s.text));
                        for (key, value) in &s.metadata {
                            text.push_str(&format!("# metadata:{key} = {value}\n"));
                        }
                    }
                    for (i, t) in s.tokens.iter().enumerate() {
                        text.push_str(&t.columns(i + 1).join("\t"));
                        text.push('\n');
                    }
                    for _ in 0..s.blank_lines_after {
                        text.push('\n');
                    }
                }
            }
            // Flush per recipe: memory holds one recipe's text, not the file's.
            if !self.final_newline && std::ptr::eq(r, self.recipes.last().unwrap_or(r)) && text.ends_with('\n') {
                text.pop();
            }
            w.write_all(text.as_bytes())?;
            text.clear();
        }
        Ok(())
    }

    /// The document in the SemEval layout, as a string.
    pub fn to_conllu_string(&self) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_conllu(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// "a", "a and b", "a, b and c": the release's lists ("the pineapple, coconut and sour cream").
pub fn join_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Tokens of a text for converting annotated text to this layout: words (letters, digits, inner apostrophes and hyphens) and single punctuation marks, with char offsets.
pub fn word_tokens(text: &str) -> Vec<(usize, usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if !c.is_alphanumeric() {
            out.push((i, i + 1, c.to_string()));
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_alphanumeric()
                || ((chars[i] == '\'' || chars[i] == '-') && chars.get(i + 1).is_some_and(|n| n.is_alphanumeric())))
        {
            i += 1;
        }
        out.push((start, i, chars[start..i].iter().collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_named_by_free_text_write_and_read_back() {
        for (name, at) in [
            ("olive oil", None),
            ("a|b:c=d", None),
            ("1.5 qt", None),
            ("", None),
            ("_", None),
            ("x.y", Some(TokenPos { step: 1, sentence: 2, token: 3 })),
        ] {
            let r = EntityRef::named(name, at);
            assert_eq!(r.to_string().parse::<EntityRef>().unwrap(), r, "{name:?}");
            assert!(!r.name.contains([' ', '|', ':', '=']));
        }
        assert_eq!(EntityRef::named("olive oil", None).name, "olive_oil");
    }

    #[test]
    fn text_is_split_into_words_and_punctuation_with_char_offsets() {
        let t = word_tokens("Chef's knife, 2-3 cm. Café");
        let words: Vec<(usize, usize, &str)> = t.iter().map(|(a, b, w)| (*a, *b, w.as_str())).collect();
        assert_eq!(
            words,
            [
                (0, 6, "Chef's"),
                (7, 12, "knife"),
                (12, 13, ","),
                (14, 17, "2-3"),
                (18, 20, "cm"),
                (20, 21, "."),
                (22, 26, "Café")
            ]
        );
    }

    #[test]
    fn references_tags_and_ids_parse_and_print_back() {
        for s in ["olive_oil.2.1.7", "..4.1.10", "mixture", "a.b", "x.1.2"] {
            let r: EntityRef = s.parse().unwrap();
            assert_eq!(r.to_string(), s);
        }
        let r: EntityRef = "..4.1.10".parse().unwrap();
        assert_eq!((r.name.as_str(), r.at), (".", Some(TokenPos { step: 4, sentence: 1, token: 10 })));
        assert_eq!("pot.01.1.1".parse::<EntityRef>().unwrap().at, None, "non-canonical numbers are part of the name");
        for s in ["_", "O", "B-EVENT", "I-IMPLICITINGREDIENT"] {
            assert_eq!(s.parse::<EntityTag>().unwrap().to_string(), s);
        }
        assert!("B-SPOON".parse::<EntityTag>().unwrap_err().contains("EXPLICITINGREDIENT"));
        for s in ["_", "B-V", "I-Co-Patient", "D-V"] {
            assert_eq!(s.parse::<SrlTag>().unwrap().to_string(), s);
        }
        assert!("X-V".parse::<SrlTag>().is_err() && "B-".parse::<SrlTag>().is_err());
        assert_eq!("18-0".parse::<QuestionId>().unwrap(), QuestionId { family: 18, index: 0 });
        assert!("4".parse::<QuestionId>().is_err() && "04-1".parse::<QuestionId>().is_err());
    }

    #[test]
    fn questions_pair_with_their_answers_and_steps_are_numbered() {
        let q = |f, i| QuestionId { family: f, index: i };
        let r = R2vqRecipe {
            id: "r-1".into(),
            header: vec![
                HeaderLine::Question { id: q(0, 0), text: "How many?".into() },
                HeaderLine::Question { id: q(4, 1), text: "Which first?".into() },
                HeaderLine::Answer { id: q(4, 1), text: "the first event".into() },
                HeaderLine::Metadata { key: "url".into(), value: "u".into() },
            ],
            paragraphs: vec![
                Paragraph { id: "r-1::ingredients".into(), sentences: vec![] },
                Paragraph { id: "r-1::step02".into(), sentences: vec![] },
            ],
        };
        let qs = r.questions();
        assert_eq!(qs.len(), 2);
        assert_eq!((qs[0].answer.as_deref(), qs[1].answer.as_deref()), (None, Some("the first event")));
        assert_eq!(r.metadata("url"), Some("u"));
        assert_eq!(r.steps().map(|p| p.step_number()).collect::<Vec<_>>(), vec![Some(2)]);
    }
}
