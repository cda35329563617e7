//! R2VQ train recipes with their cooking-role annotation written into the step text (HIT-QMUL's derived files,
//! `inline_tagged/entity_*.json`): `{recipe: [step, ...]}`, each step lower-cased and tokenized, each annotation a
//! group after the token it belongs to:
//!
//! ```text
//! cut ( result : chopped vegetables # tool : knife )  ( entity : B-EVENT ) the broccoli ( participant : cut ) ...
//! ```
//!
//! `entity` gives the ENTITY tag (only EVENT and TOOL are inlined), `participant : V` the event (by its words) the
//! token takes part in, and `result`/`tool`/`habitat`/`drop`/`shadow` the event's hidden arguments (values
//! separated by ` , `). The gold QA strings (`train_text_qa_baseline_*.json`: `{" recipe": {"question":
//! ["<question>     <answer>", ...]}}`) can be attached.
//!
//! The inline form is lossy, and what this reader rebuilds is said here so results on it can be read right:
//! - one sentence per step (the steps are not split); lemmas are the lower-cased forms; no SRL columns;
//! - a participant tag sits on a mention's first token only: the mention is extended over the following
//!   untagged words (at most three; not across punctuation, conjunctions, prepositions, articles, adverbs in
//!   -ly, or an event);
//! - a participant mention is a HABITAT or TOOL when its words are a hidden habitat or tool name of the recipe,
//!   else an explicit ingredient;
//! - coreference: mentions (and hidden values) with the same words are one entity (COREF is the bare name);
//! - `participant : V` points at the nearest event of the step whose words are V (the earlier one on a tie);
//! - questions carry no family ids: the family is the template's when it has one, else read off the answer's
//!   form ("by using a ..." → 2, "to ..." → 12, "with ..." → 13, "so ..." → 11, ...), and "N/A" → 18; the
//!   families 6, 10 and 14 share "How do you ...?" and answer forms, and are all counted as 6.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use stepwise_core::error::{Error, Location, Result};
use stepwise_core::json::read_json;

use super::one_line;
use crate::format::{Format, Ingested, Origin, ReadOptions, Sniff, contains, skip_ws};
use stepwise_core::r2vq::{
    EntityKind, EntityRef, EntityTag, HeaderLine, HiddenArg, HiddenRole, InlineToken, Paragraph, QuestionId,
    R2vqDocument, R2vqRecipe, Sentence, Token,
};

/// The family of an answered question without a family id (see the module documentation).
pub type FamilyOf<'a> = &'a dyn Fn(&str, &str) -> Option<u32>;

/// The inline-tagged files as an ingest format (`r2vq-inline`): each recipe becomes a procedure as the SemEval
/// layout's recipes do ([`super::r2vq_conllu::recipe_procedure`]): steps are the rebuilt step texts (lower-cased
/// and tokenized as the file has them, the annotation left out). The files hold neither titles nor ingredients.
pub struct R2vqInline;

/// The annotation groups an inline-tagged step carries (what tells the format apart from other JSON).
const INLINE_MARKS: [&[u8]; 5] = [b"( participant :", b"( entity :", b"( result :", b"( tool :", b"( habitat :"];

impl Format for R2vqInline {
    fn name(&self) -> &'static str {
        "r2vq-inline"
    }

    fn describe(&self) -> &'static str {
        "R2VQ recipes with the cooking-role annotation written inline (HIT-QMUL's inline_tagged/{data,entity}_*.json: \
         {recipe: [step, ...]}); steps become procedure steps, the annotation is left out of their text"
    }

    fn sniff(&self, _path: &Path, head: &[u8]) -> Sniff {
        let h = skip_ws(head);
        if h.starts_with(b"{") && contains(h, b"\": [") && INLINE_MARKS.iter().any(|m| contains(h, m)) {
            Sniff::Yes
        } else {
            Sniff::No
        }
    }

    fn read(&self, inputs: &[PathBuf], opts: &ReadOptions) -> Result<Ingested> {
        let mut out = Ingested::default();
        for path in inputs {
            let doc = document_of_inline(read_inline_steps(path)?);
            let image_base = opts.image_base(path);
            for r in &doc.recipes {
                out.push(
                    super::r2vq_conllu::recipe_procedure(r),
                    Origin { file: path.clone(), record: format!("recipe {}", r.id), image_base: image_base.clone() },
                );
            }
        }
        Ok(out)
    }
}

/// Read an inline-tagged file and, when given, the gold QA strings of its recipes. `family_of(question,
/// answer)` names a question's family (`None`: the question is left out and counted in the returned number).
pub fn read_inline_tagged(path: &Path, qa: Option<&Path>, family_of: FamilyOf) -> Result<(R2vqDocument, usize)> {
    // Parse every step first: the prop lexicon (names of hidden habitats and tools, TOOL mentions) is the file's.
    let parsed = read_inline_steps(path)?;
    let mut doc = document_of_inline(parsed);
    let mut unlabelled = 0;
    if let Some(qa) = qa {
        unlabelled = attach_questions(&mut doc, qa, family_of)?;
    }
    Ok((doc, unlabelled))
}

/// Read an inline-tagged file's steps, parsed, in file order; an empty file or a recipe id with spaces is an
/// error naming the file and record.
pub fn read_inline_steps(path: &Path) -> Result<Vec<(String, Vec<Vec<InlineToken>>)>> {
    let Value::Object(recipes) = read_json(path)? else {
        return Err(Error::field(path, Location::File, "", "must be a JSON object {recipe: [step, ...]}"));
    };
    // As the SemEval layout's reader: a document without recipes could not be written and read back.
    if recipes.is_empty() {
        return Err(Error::Empty {
            path: path.to_path_buf(),
            what: "no recipe in the object {recipe: [step, ...]}".into(),
        });
    }
    let mut parsed = Vec::with_capacity(recipes.len());
    for (id, steps) in &recipes {
        let id = id.trim();
        if id.is_empty() || id.contains(char::is_whitespace) {
            return Err(Error::field(path, Location::Record(id.to_string()), id, "a recipe id must be one word"));
        }
        let location = Location::Record(id.to_string());
        let Value::Array(steps) = steps else {
            return Err(Error::field(path, location, id, "must be a list of step strings"));
        };
        let mut raws = Vec::with_capacity(steps.len());
        for (k, step) in steps.iter().enumerate() {
            let field = format!("{id}[{k}]");
            let text = step.as_str().ok_or_else(|| Error::field(path, location.clone(), &field, "must be a string"))?;
            raws.push(
                parse_inline_step(text).map_err(|m| Error::field(path, Location::Record(field.clone()), &field, m))?,
            );
        }
        parsed.push((id.to_string(), raws));
    }
    Ok(parsed)
}

/// Recipes rebuilt from parsed inline-tagged steps as the module documentation says (the prop lexicon is the
/// recipes' together).
pub fn document_of_inline<S: AsRef<str>>(parsed: Vec<(S, Vec<Vec<InlineToken>>)>) -> R2vqDocument {
    let lexicon = PropLexicon::of(parsed.iter().flat_map(|(_, steps)| steps.iter().flatten()));
    let mut doc = R2vqDocument { recipes: Vec::with_capacity(parsed.len()), final_newline: true };
    for (id, steps) in parsed {
        let id = id.as_ref();
        let mut paragraphs: Vec<Paragraph> = steps
            .into_iter()
            .enumerate()
            .map(|(k, raw)| Paragraph {
                id: format!("{id}::step{:02}", k + 1),
                sentences: vec![build_sentence(id, k + 1, raw, &lexicon)],
            })
            .collect();
        if let Some(last) = paragraphs.last_mut().and_then(|p| p.sentences.last_mut()) {
            last.blank_lines_after = 2;
        }
        doc.recipes.push(R2vqRecipe { id: id.to_string(), header: Vec::new(), paragraphs });
    }
    doc
}

/// Attach `"<question>     <answer>"` strings as `# question`/`# answer` header lines, numbered per family.
fn attach_questions(doc: &mut R2vqDocument, path: &Path, family_of: FamilyOf) -> Result<usize> {
    let Value::Object(qa) = read_json(path)? else {
        return Err(Error::field(path, Location::File, "", "must be a JSON object {recipe: {question: [...]}}"));
    };
    let mut unlabelled = 0;
    // Question numbers per recipe and family (two QA keys may name one recipe: " r-1" and "r-1").
    let mut next_index: std::collections::BTreeMap<usize, std::collections::BTreeMap<u32, u32>> = Default::default();
    let index: std::collections::HashMap<String, usize> =
        doc.recipes.iter().enumerate().map(|(i, r)| (r.id.clone(), i)).collect();
    for (id, entry) in &qa {
        let location = Location::Record(id.trim().to_string());
        let Some(&r) = index.get(id.trim()) else {
            // QA for a recipe the annotation file does not have: nothing to answer from.
            continue;
        };
        let strings = entry
            .get("question")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::field(path, location.clone(), format!("{}.question", id.trim()), "missing list"))?;
        let next = next_index.entry(r).or_default();
        for (k, s) in strings.iter().enumerate() {
            let field = format!("{}.question[{k}]", id.trim());
            let s = s.as_str().ok_or_else(|| Error::field(path, location.clone(), &field, "must be a string"))?;
            let (q, a) = s.split_once("     ").ok_or_else(|| {
                Error::field(path, location.clone(), &field, "no \"     \" between question and answer")
            })?;
            let (q, a) = (one_line(q), one_line(a));
            let (q, a) = (q.as_str(), a.as_str());
            let Some(family) = family_of(q, a) else {
                unlabelled += 1;
                continue;
            };
            let n = next.entry(family).or_default();
            let qid = QuestionId { family, index: *n };
            *n += 1;
            let header = &mut doc.recipes[r].header;
            header.push(HeaderLine::Question { id: qid, text: q.to_string() });
            header.push(HeaderLine::Answer { id: qid, text: a.to_string() });
        }
    }
    Ok(unlabelled)
}

/// One annotation group: `key : value # key : value`.
fn parse_group(group: &str) -> std::result::Result<Vec<(String, String)>, String> {
    group
        .split(" # ")
        .map(|kv| {
            // An empty value ("habitat :") occurs in the train file: kept empty, the caller skips it.
            let kv = kv.trim();
            let (k, v) = kv
                .split_once(" : ")
                .or_else(|| kv.strip_suffix(" :").map(|k| (k, "")))
                .ok_or_else(|| format!("annotation {kv:?} is not `key : value`"))?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

const KEYS: [&str; 7] = ["entity", "participant", "result", "tool", "habitat", "drop", "shadow"];

/// Names of habitats and tools in a file: hidden Habitat/Tool values and TOOL-tagged mentions.
#[derive(Default)]
struct PropLexicon {
    habitats: BTreeSet<String>,
    tools: BTreeSet<String>,
}

impl PropLexicon {
    fn of<'a>(tokens: impl Iterator<Item = &'a InlineToken>) -> PropLexicon {
        let tokens: Vec<&InlineToken> = tokens.collect();
        let mut lex = PropLexicon::default();
        for (i, t) in tokens.iter().enumerate() {
            for h in &t.hidden {
                let names = h.values.iter().map(|v| v.name.replace('_', " "));
                match h.role {
                    HiddenRole::Habitat => lex.habitats.extend(names),
                    HiddenRole::Tool => lex.tools.extend(names),
                    _ => {}
                }
            }
            if t.entity == Some(EntityTag::Begin(EntityKind::Tool)) {
                let mut words = vec![t.form.as_str()];
                words.extend(
                    tokens[i + 1..]
                        .iter()
                        .take_while(|u| u.entity == Some(EntityTag::Inside(EntityKind::Tool)))
                        .map(|u| u.form.as_str()),
                );
                lex.tools.insert(words.join(" "));
            }
        }
        lex
    }
}

/// Parse one inline-tagged step into its words and their annotation.
pub fn parse_inline_step(text: &str) -> std::result::Result<Vec<InlineToken>, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut raw: Vec<InlineToken> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let is_group =
            words[i] == "(" && words.get(i + 2) == Some(&":") && words.get(i + 1).is_some_and(|k| KEYS.contains(k));
        if !is_group {
            raw.push(InlineToken { form: words[i].to_string(), ..InlineToken::default() });
            i += 1;
            continue;
        }
        let close = words[i..]
            .iter()
            .position(|w| *w == ")")
            .ok_or_else(|| format!("annotation after word {} is not closed", raw.len()))?;
        let group = words[i + 1..i + close].join(" ");
        let Some(token) = raw.last_mut() else {
            return Err("an annotation before the first word".into());
        };
        for (key, value) in parse_group(&group)? {
            if value.is_empty() {
                continue;
            }
            match key.as_str() {
                "entity" => {
                    token.entity = Some(value.parse().map_err(|e: String| format!("entity of {:?}: {e}", token.form))?)
                }
                "participant" => token.participant = Some(value),
                _ => {
                    let role = match key.as_str() {
                        "result" => HiddenRole::Result,
                        "tool" => HiddenRole::Tool,
                        "habitat" => HiddenRole::Habitat,
                        "drop" => HiddenRole::Drop,
                        "shadow" => HiddenRole::Shadow,
                        other => return Err(format!("unknown annotation key {other:?}")),
                    };
                    let values = value.split(" , ").map(|v| EntityRef::named(v, None)).collect();
                    token.hidden.push(HiddenArg { role, values });
                }
            }
        }
        i += close + 1;
    }
    if raw.is_empty() {
        return Err("a step without words".into());
    }
    Ok(raw)
}

/// How many plain words after a participant's tagged word its mention takes at most.
pub const MENTION_EXTENSION: usize = 3;

/// Whether an untagged word after a participant's tagged word extends its mention ("chopped (participant) green
/// onions"): a word of letters, not a stop word, not an -ly adverb. The tagger names its mentions by the same rule.
pub fn extends_mention(form: &str) -> bool {
    form.chars().all(char::is_alphabetic) && !STOP.contains(&form) && !(form.ends_with("ly") && form.len() > 4)
}

/// Words that end a participant mention's extension.
const STOP: &[&str] = &[
    "and", "or", "in", "into", "on", "onto", "with", "to", "of", "for", "from", "until", "at", "by", "the", "a", "an",
    "then", "over", "about", "while", "it", "them", "together", "well", "aside", "again", "evenly", "gently",
];

fn build_sentence(recipe: &str, step: usize, raw: Vec<InlineToken>, lexicon: &PropLexicon) -> Sentence {
    let n = raw.len();
    let is_event = |t: &InlineToken| {
        matches!(t.entity, Some(EntityTag::Begin(EntityKind::Event) | EntityTag::Inside(EntityKind::Event)))
    };
    // Event spans (first, last) and their words.
    let mut events: Vec<(usize, usize, String)> = Vec::new();
    for (i, t) in raw.iter().enumerate() {
        if t.entity == Some(EntityTag::Begin(EntityKind::Event)) {
            let mut j = i;
            while j + 1 < n && raw[j + 1].entity == Some(EntityTag::Inside(EntityKind::Event)) {
                j += 1;
            }
            let words = raw[i..=j].iter().map(|t| t.form.as_str()).collect::<Vec<_>>().join(" ");
            events.push((i, j, words));
        }
    }
    let mut tokens: Vec<Token> = raw
        .iter()
        .map(|t| Token {
            entity: t.entity.unwrap_or(EntityTag::Outside),
            hidden: t.hidden.clone(),
            ..Token::plain(&t.form)
        })
        .collect();
    for (i, t) in raw.iter().enumerate() {
        let Some(target) = &t.participant else { continue };
        // The nearest event with those words (the earlier one on a tie).
        let head = events.iter().filter(|e| &e.2 == target).min_by_key(|e| (e.0.abs_diff(i), e.0)).map(|e| e.0);
        tokens[i].part = head.map(|h| h + 1);
        if matches!(tokens[i].entity, EntityTag::Begin(_)) {
            continue;
        }
        let mut last = i;
        while last + 1 < n
            && last < i + MENTION_EXTENSION
            && raw[last + 1].participant.is_none()
            && raw[last + 1].entity.is_none()
            && !is_event(&raw[last + 1])
            && raw[last + 1].hidden.is_empty()
            && extends_mention(&raw[last + 1].form)
        {
            last += 1;
        }
        let words = raw[i..=last].iter().map(|t| t.form.as_str()).collect::<Vec<_>>().join(" ");
        let kind = if lexicon.habitats.contains(&words) {
            EntityKind::Habitat
        } else if lexicon.tools.contains(&words) {
            EntityKind::Tool
        } else {
            EntityKind::ExplicitIngredient
        };
        tokens[i].entity = EntityTag::Begin(kind);
        tokens[i].coref = Some(EntityRef::named(&words, None));
        for t in &mut tokens[i + 1..=last] {
            t.entity = EntityTag::Inside(kind);
        }
    }
    // TOOL-tagged mentions without a participant tag: same-name coreference too.
    for i in 0..n {
        if raw[i].entity == Some(EntityTag::Begin(EntityKind::Tool)) && tokens[i].coref.is_none() {
            let words: Vec<&str> = std::iter::once(raw[i].form.as_str())
                .chain(
                    raw[i + 1..]
                        .iter()
                        .take_while(|u| u.entity == Some(EntityTag::Inside(EntityKind::Tool)))
                        .map(|u| u.form.as_str()),
                )
                .collect();
            tokens[i].coref = Some(EntityRef::named(&words.join(" "), None));
        }
    }
    let text = raw.iter().map(|t| t.form.as_str()).collect::<Vec<_>>().join(" ");
    Sentence {
        id: format!("{recipe}::step{step:02}::sent01"),
        text,
        metadata: Vec::new(),
        tokens,
        blank_lines_after: 1,
        continues: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_steps_written_read_back_the_same() {
        let text = "cut ( result : chopped vegetables # tool : knife )  ( entity : B-EVENT ) the broccoli \
                    ( participant : cut ) and a kitchen ( participant : cut )  ( entity : B-TOOL ) fork \
                    ( entity : I-TOOL ) ; bake ( drop : dough , pie weights # habitat : aluminum foil ) \
                    ( entity : B-EVENT ) it .";
        let tokens = parse_inline_step(text).unwrap();
        let written = stepwise_core::r2vq::inline_step_string(&tokens);
        assert_eq!(parse_inline_step(&written).unwrap(), tokens, "{written}");
        assert_eq!(tokens[0].hidden[1].values[0].name, "knife");
        assert_eq!(tokens.iter().filter(|t| t.participant.is_some()).count(), 2);
    }

    #[test]
    fn inline_annotation_becomes_columns() {
        let step = |text: &str| {
            let raw = parse_inline_step(text)?;
            let lexicon = PropLexicon::of(raw.iter());
            Ok::<_, String>(build_sentence("r", 1, raw, &lexicon))
        };
        let s = step(
            "cut ( result : chopped vegetables # tool : knife )  ( entity : B-EVENT ) the broccoli ( participant : cut ) \
             into pieces ; saute ( habitat : pan )  ( entity : B-EVENT ) olive ( participant : saute ) oil in a pan \
             ( participant : saute ) ( about 2 minutes ) .",
        )
        .unwrap();
        let forms: Vec<&str> = s.tokens.iter().map(|t| t.form.as_str()).collect();
        assert_eq!(forms.join(" "), s.text);
        assert_eq!(s.text, "cut the broccoli into pieces ; saute olive oil in a pan ( about 2 minutes ) .");
        let cut = &s.tokens[0];
        assert_eq!(cut.entity, EntityTag::Begin(EntityKind::Event));
        assert_eq!(cut.hidden.len(), 2);
        assert_eq!(cut.hidden[0].values[0].name, "chopped_vegetables");
        assert_eq!(s.tokens[2].part, Some(1), "broccoli takes part in cut");
        assert_eq!(s.tokens[7].entity, EntityTag::Begin(EntityKind::ExplicitIngredient));
        assert_eq!(s.tokens[8].entity, EntityTag::Inside(EntityKind::ExplicitIngredient), "olive oil is one mention");
        assert_eq!(s.tokens[9].entity, EntityTag::Outside);
        assert_eq!(s.tokens[7].part, Some(7), "olive oil takes part in saute");
        assert_eq!(s.tokens[11].entity, EntityTag::Begin(EntityKind::Habitat), "pan is a hidden habitat's name");
        assert_eq!(s.tokens[11].coref.as_ref().unwrap().name, "pan");
        assert!(step("cut ( tool : knife").unwrap_err().contains("not closed"));
        assert!(step("( tool : knife ) cut").unwrap_err().contains("before the first word"));
        assert!(step("cut ( entity : B-SPOON )").unwrap_err().contains("entity"));
        assert!(step("cut ( tool knife )").is_ok(), "not an annotation group: text in parentheses");
        assert!(step("cut ( tool : knife # habitat )").unwrap_err().contains("key : value"));
        assert!(step("cut ( habitat : )").unwrap().tokens[0].hidden.is_empty(), "empty value skipped");
    }

    #[test]
    fn files_are_read_with_questions_numbered_per_family_and_errors_name_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let (a, q) = (dir.path().join("a.json"), dir.path().join("q.json"));
        std::fs::write(&a, r#"{"r1": ["cut ( entity : B-EVENT ) onions ( participant : cut ) .", "serve ( drop : onions )  ( entity : B-EVENT ) ."]}"#).unwrap();
        std::fs::write(&q, r#"{" r1": {"question": [" What should be served?     the onions", " Is it?     yes", " How many actions does it take to process the onions?     1"]}}"#).unwrap();
        let family = crate::readers::r2vq_2021::tests::family;
        let (doc, unlabelled) = read_inline_tagged(&a, Some(&q), &family).unwrap();
        assert_eq!(unlabelled, 1);
        let qs = doc.recipes[0].questions();
        assert_eq!(qs.len(), 2);
        assert_eq!((qs[0].id.to_string(), qs[0].answer.as_deref()), ("1-0".into(), Some("the onions")));
        // Written in the SemEval layout and read back, the document is the same.
        let text = doc.to_conllu_string();
        let back = crate::readers::r2vq_conllu::parse_r2vq_conllu(Path::new("x.csv"), &text).unwrap();
        assert_eq!(back, doc);
        std::fs::write(&a, r#"{"r1": ["cut ( entity : B-EVENT ) .", 3]}"#).unwrap();
        let e = read_inline_tagged(&a, None, &family).unwrap_err().to_string();
        assert!(e.contains("r1[1]") && e.contains("string"), "{e}");
        // An object without recipes is an error naming the file (the SemEval layout could not hold what it reads).
        std::fs::write(&a, "{}").unwrap();
        let e = read_inline_tagged(&a, Some(&q), &family).unwrap_err();
        assert!(matches!(e, Error::Empty { .. }) && e.to_string().contains("a.json"), "{e}");
    }
}
