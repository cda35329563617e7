//! The 2021 R2VQ release (recipe2video, `r2vq.jsonl`): one recipe per line with its text (`content`), step and
//! sentence start offsets, and brat-style annotation with character offsets — `ingredients`, `props` (usage
//! tool/habitat, orientation), `verbs` (with `implicit_props`), `events` (a verb with its ingredients and props),
//! `instantiations` (an implicit ingredient and the event that made it) — and `questions` as `[question,
//! answer]` pairs whose answer is a count, a boolean, or lists of span ids (each list one correct answer).
//!
//! The recipe becomes the SemEval layout: steps as paragraphs, the release's sentences as sentences (tokenized by
//! [`stepwise_core::r2vq::word_tokens`]); mentions as ENTITY spans; an event's arguments in its sentence point at
//! it (PART), those elsewhere and its implicit props are hidden arguments (Drop, Tool, Habitat); an
//! instantiation is the event's hidden Result, and the ingredient's coreference id; `ref_id` links give
//! coreference (the chain's first mention names the entity). Recipes have no ids in the release: `2021-LNN`
//! after their line, the title kept as metadata. Offsets count characters from the first step's start
//! (`steps_offset[0]`). Answers become text: counts as numbers, booleans `true`/`false`, span lists as the
//! mentions joined "a, b and c"; a question with several lists has several correct answers (repeated `# answer`
//! lines). A question's family is named by the caller (the release has no family ids).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use stepwise_core::error::{Error, Location, Result};
use stepwise_core::json::{Obj, read_jsonl};
use stepwise_core::r2vq::{
    EntityKind, EntityRef, EntityTag, HeaderLine, HiddenArg, HiddenRole, ORIENTATION_KEY, Paragraph, QuestionId,
    R2vqDocument, R2vqRecipe, Sentence, Token, TokenPos, join_list, word_tokens,
};

use super::one_line;
use super::r2vq_inline::FamilyOf;

/// Read the release; `family_of(question, first answer)` names each question's family (`None`: left out and
/// counted in the returned number).
pub fn read_r2vq_2021(path: &Path, family_of: FamilyOf) -> Result<(R2vqDocument, usize)> {
    let mut doc = R2vqDocument { recipes: Vec::new(), final_newline: true };
    let mut unlabelled = 0;
    for record in read_jsonl(path)? {
        let location = Location::Line { line: record.line, column: None };
        let obj = Obj::new(&record.value, path, &location, "")?;
        let (recipe, n) = recipe(&obj, record.line, family_of)?;
        unlabelled += n;
        doc.recipes.push(recipe);
    }
    // As the SemEval layout's reader: a document without recipes could not be written and read back.
    if doc.recipes.is_empty() {
        return Err(Error::Empty { path: path.to_path_buf(), what: "no recipe (one JSON object per line)".into() });
    }
    Ok((doc, unlabelled))
}

/// A mention found in the text: where it is and what it is.
struct Placed {
    kind: EntityKind,
    sentence: usize,
    first: usize,
    last: usize,
    name: String,
    mention: String,
    ref_id: Option<String>,
    usage: Option<String>,
    orientation: Option<String>,
}

fn offsets(obj: &Obj<'_>, base: i64) -> Result<Option<(usize, usize)>> {
    let spans = obj.req_array("offset")?;
    let Some(first) = spans.first().and_then(Value::as_array) else {
        return Err(obj.error("offset", "must be [[start, end], ...]"));
    };
    let num = |v: Option<&Value>| v.and_then(Value::as_i64).ok_or_else(|| obj.error("offset", "must hold integers"));
    let (s, e) = (num(first.first())?, num(first.get(1))?);
    if s < 0 {
        return Ok(None); // unwritten (implicit props)
    }
    match (s.checked_sub(base), e.checked_sub(s), e.checked_sub(base)) {
        (Some(rs), Some(_), Some(re)) if rs >= 0 => Ok(Some((rs as usize, re as usize))),
        _ => Err(obj.error("offset", format!("[{s}, {e}] is not inside the recipe text (it starts at {base})"))),
    }
}

fn recipe(obj: &Obj<'_>, line: usize, family_of: FamilyOf) -> Result<(R2vqRecipe, usize)> {
    let id = format!("2021-L{line:02}");
    let content: Vec<char> = obj.req_str("content")?.chars().collect();
    let ints = |key: &str| -> Result<Vec<i64>> {
        obj.req_array(key)?
            .iter()
            .map(|v| v.as_i64().ok_or_else(|| obj.error(key, "must be a list of integers")))
            .collect()
    };
    let (steps, sents) = (ints("steps_offset")?, ints("sents_offset")?);
    let base = *steps.first().ok_or_else(|| obj.error("steps_offset", "is empty"))?;
    let rel = |v: i64, key: &str| -> Result<usize> {
        match v.checked_sub(base) {
            Some(r) if r >= 0 && r as usize <= content.len() => Ok(r as usize),
            _ => Err(obj.error(key, format!("offset {v} is outside the recipe text"))),
        }
    };
    let step_starts: Vec<usize> = steps.iter().map(|&v| rel(v, "steps_offset")).collect::<Result<_>>()?;
    let mut sent_starts: Vec<usize> = sents.iter().map(|&v| rel(v, "sents_offset")).collect::<Result<_>>()?;
    sent_starts.sort_unstable();
    sent_starts.dedup();
    if sent_starts.first() != Some(&0) {
        sent_starts.insert(0, 0);
    }
    // Sentences: char range, tokens with absolute char offsets, step number and number within the step.
    struct Sent {
        start: usize,
        end: usize,
        tokens: Vec<(usize, usize, String)>,
        step: u32,
        number: u32,
    }
    let mut sentences: Vec<Sent> = Vec::new();
    for (i, &start) in sent_starts.iter().enumerate() {
        let end = sent_starts.get(i + 1).copied().unwrap_or(content.len());
        let text: String = content[start..end].iter().collect();
        let tokens: Vec<(usize, usize, String)> =
            word_tokens(&text).into_iter().map(|(a, b, w)| (start + a, start + b, w)).collect();
        if tokens.is_empty() {
            continue;
        }
        let step = step_starts.iter().filter(|&&s| s <= start).count().max(1) as u32;
        let number = sentences.iter().filter(|s| s.step == step).count() as u32 + 1;
        sentences.push(Sent { start, end, tokens, step, number });
    }
    // Mentions by id.
    let mut placed: BTreeMap<String, Placed> = BTreeMap::new();
    let mut implicit_names: BTreeMap<String, String> = BTreeMap::new();
    let mut place = |a: &Obj<'_>, kind: EntityKind, placed: &mut BTreeMap<String, Placed>| -> Result<()> {
        let aid = a.req_str("aid")?.to_string();
        let name = a.opt_str("name")?.unwrap_or_default().to_string();
        let mention = a.opt_str("mention")?.unwrap_or_default().to_string();
        let Some((s, e)) = offsets(a, base)? else {
            implicit_names.insert(aid, mention);
            return Ok(());
        };
        let Some(si) = sentences.iter().position(|x| x.start <= s && s < x.end) else {
            return Err(a.error("offset", format!("{s} is in no sentence")));
        };
        let toks = &sentences[si].tokens;
        let (Some(first), Some(last)) =
            (toks.iter().position(|t| t.1 > s && t.0 < e), toks.iter().rposition(|t| t.1 > s && t.0 < e))
        else {
            return Err(a.error("offset", format!("[{s}, {e}] covers no word")));
        };
        let kind = match (kind, a.opt_str("expression")?, a.opt_str("usage")?) {
            (EntityKind::ExplicitIngredient, Some("implicit"), _) => EntityKind::ImplicitIngredient,
            (EntityKind::Tool, _, Some("habitat")) => EntityKind::Habitat,
            (k, _, _) => k,
        };
        let ref_id = a.opt_str("ref_id")?.map(str::to_string);
        let usage = a.opt_str("usage")?.map(str::to_string);
        // One word ("not_upright"), as the orientation metadata line holds it.
        let orientation = a.opt_str("orientation")?.map(|o| EntityRef::named(o, None).name);
        placed.insert(aid, Placed { kind, sentence: si, first, last, name, mention, ref_id, usage, orientation });
        Ok(())
    };
    let list = |key: &str| -> Result<Vec<Value>> { Ok(obj.opt_array(key)?.cloned().unwrap_or_default()) };
    let (ingredients, props, verbs) = (list("ingredients")?, list("props")?, list("verbs")?);
    for (key, items, kind) in [
        ("ingredients", &ingredients, EntityKind::ExplicitIngredient),
        ("props", &props, EntityKind::Tool),
        ("verbs", &verbs, EntityKind::Event),
    ] {
        for (i, v) in items.iter().enumerate() {
            let loc = Location::Line { line, column: None };
            let a = Obj::new(v, obj.path, &loc, &format!("{key}[{i}]."))?;
            place(&a, kind, &mut placed)?;
            for (j, p) in a.opt_array("implicit_props")?.into_iter().flatten().enumerate() {
                let b = Obj::new(p, obj.path, &loc, &format!("{key}[{i}].implicit_props[{j}]."))?;
                place(&b, EntityKind::Tool, &mut placed)?;
            }
        }
    }
    // Tokens.
    let mut tokens: Vec<Vec<Token>> =
        sentences.iter().map(|s| s.tokens.iter().map(|(_, _, w)| Token::plain(w)).collect()).collect();
    let pos = |p: &Placed| TokenPos {
        step: sentences[p.sentence].step,
        sentence: sentences[p.sentence].number,
        token: p.first as u32 + 1,
    };
    let root_of = |aid: &str| -> Option<&Placed> {
        let mut p = placed.get(aid)?;
        for _ in 0..placed.len() {
            match p.ref_id.as_deref().and_then(|r| placed.get(r)) {
                Some(next) => p = next,
                None => break,
            }
        }
        Some(p)
    };
    let entity_ref = |aid: &str| -> Option<EntityRef> {
        let root = root_of(aid)?;
        Some(EntityRef::named(&root.name, Some(pos(root))))
    };
    for (aid, p) in &placed {
        let row = &mut tokens[p.sentence];
        if row[p.first..=p.last].iter().any(|t| t.entity != EntityTag::Outside) {
            continue;
        }
        row[p.first].entity = EntityTag::Begin(p.kind);
        for t in &mut row[p.first + 1..=p.last] {
            t.entity = EntityTag::Inside(p.kind);
        }
        if p.kind != EntityKind::Event {
            row[p.first].coref = entity_ref(aid);
        }
    }
    let add_hidden =
        |t: &mut Token, role: HiddenRole, value: EntityRef| match t.hidden.iter_mut().find(|h| h.role == role) {
            Some(h) if !h.values.contains(&value) => h.values.push(value),
            Some(_) => {}
            None => t.hidden.push(HiddenArg { role, values: vec![value] }),
        };
    let loc = Location::Line { line, column: None };
    // A verb's implicit props are its hidden tools and habitats, whether or not an event lists the verb.
    for (i, v) in verbs.iter().enumerate() {
        let verb = Obj::new(v, obj.path, &loc, &format!("verbs[{i}]."))?;
        let Some(head) = placed.get(verb.req_str("aid")?) else { continue };
        for (j, p) in verb.opt_array("implicit_props")?.into_iter().flatten().enumerate() {
            let b = Obj::new(p, obj.path, &loc, &format!("verbs[{i}].implicit_props[{j}]."))?;
            let role = if b.opt_str("usage")? == Some("habitat") { HiddenRole::Habitat } else { HiddenRole::Tool };
            let name = EntityRef::named(b.opt_str("name")?.unwrap_or_default(), None);
            add_hidden(&mut tokens[head.sentence][head.first], role, name);
        }
    }
    for (i, v) in list("events")?.iter().enumerate() {
        let e = Obj::new(v, obj.path, &loc, &format!("events[{i}]."))?;
        let verb = e.req("verb")?;
        let vobj = Obj::new(verb, obj.path, &loc, &format!("events[{i}].verb."))?;
        let Some(head) = placed.get(vobj.req_str("aid")?) else { continue };
        let (hs, ht) = (head.sentence, head.first);
        for key in ["ingredients", "props"] {
            for (j, a) in e.opt_array(key)?.into_iter().flatten().enumerate() {
                let b = Obj::new(a, obj.path, &loc, &format!("events[{i}].{key}[{j}]."))?;
                let Some(arg) = placed.get(b.req_str("aid")?) else { continue };
                if arg.sentence == hs {
                    tokens[arg.sentence][arg.first].part = Some(ht + 1);
                } else if let Some(r) = entity_ref(b.req_str("aid")?) {
                    let role = match (key, arg.usage.as_deref()) {
                        ("props", Some("habitat")) => HiddenRole::Habitat,
                        ("props", _) => HiddenRole::Tool,
                        _ => HiddenRole::Drop,
                    };
                    add_hidden(&mut tokens[hs][ht], role, r);
                }
            }
        }
    }
    for (i, v) in list("instantiations")?.iter().enumerate() {
        let x = Obj::new(v, obj.path, &loc, &format!("instantiations[{i}]."))?;
        let ing = Obj::new(x.req("ingredient")?, obj.path, &loc, &format!("instantiations[{i}].ingredient."))?;
        let ev = x.req("event")?;
        let verb = ev.get("verb").and_then(|v| v.get("aid")).and_then(Value::as_str);
        let (Some(made), Some(head)) = (placed.get(ing.req_str("aid")?), verb.and_then(|a| placed.get(a))) else {
            continue;
        };
        let result = EntityRef::named(&made.name, Some(pos(head)));
        add_hidden(&mut tokens[head.sentence][head.first], HiddenRole::Result, result.clone());
        if made.ref_id.is_none() {
            tokens[made.sentence][made.first].coref = Some(result);
        }
    }
    // Prop orientations, per sentence.
    let mut orientations: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for p in placed.values() {
        if let Some(o) = &p.orientation
            && matches!(p.kind, EntityKind::Tool | EntityKind::Habitat)
        {
            orientations.entry(p.sentence).or_default().push(format!("{}={o}", p.first + 1));
        }
    }
    for list in orientations.values_mut() {
        list.sort_by_key(|x| x.split('=').next().and_then(|t| t.parse::<usize>().ok()));
        list.dedup();
    }
    // Paragraphs.
    let mut paragraphs: Vec<Paragraph> = Vec::new();
    for (si, (s, toks)) in sentences.iter().zip(tokens).enumerate() {
        let pid = format!("{id}::step{:02}", s.step);
        if paragraphs.last().is_none_or(|p| p.id != pid) {
            paragraphs.push(Paragraph { id: pid.clone(), sentences: Vec::new() });
        }
        let text: String = one_line(&content[s.start..s.end].iter().collect::<String>());
        paragraphs.last_mut().expect("pushed").sentences.push(Sentence {
            id: format!("{pid}::sent{:02}", s.number),
            text,
            metadata: orientations
                .get(&si)
                .map(|o| vec![(ORIENTATION_KEY.to_string(), o.join(" "))])
                .unwrap_or_default(),
            tokens: toks,
            blank_lines_after: 1,
            continues: false,
        });
    }
    if let Some(last) = paragraphs.last_mut().and_then(|p| p.sentences.last_mut()) {
        last.blank_lines_after = 2;
    }
    // Questions.
    let mut header = Vec::new();
    if let Some(title) = obj.opt_str("title")? {
        header.push(HeaderLine::Metadata { key: "title".into(), value: one_line(title) });
    }
    let mut unlabelled = 0;
    let mut next: BTreeMap<u32, u32> = BTreeMap::new();
    let text_of = |aid: &str| placed.get(aid).map(|p| p.mention.clone()).or_else(|| implicit_names.get(aid).cloned());
    for (k, qa) in obj.opt_array("questions")?.into_iter().flatten().enumerate() {
        let field = format!("questions[{k}]");
        let pair =
            qa.as_array().filter(|p| p.len() == 2).ok_or_else(|| obj.error(&field, "must be [question, answer]"))?;
        let question = pair[0].as_str().ok_or_else(|| obj.error(&field, "the question must be a string"))?;
        let answers: Vec<String> = match &pair[1] {
            Value::Number(n) => vec![n.to_string()],
            Value::Bool(b) => vec![b.to_string()],
            Value::Array(lists) if !lists.is_empty() => lists
                .iter()
                .map(|l| {
                    let ids = l.as_array().ok_or_else(|| obj.error(&field, "the answer must be lists of span ids"))?;
                    let names = ids
                        .iter()
                        .map(|i| {
                            let aid = i.as_str().ok_or_else(|| obj.error(&field, "span ids must be strings"))?;
                            text_of(aid).ok_or_else(|| {
                                obj.error(&field, format!("names span {aid:?}, which the recipe does not have"))
                            })
                        })
                        .collect::<Result<Vec<String>>>()?;
                    Ok(one_line(&join_list(&names)))
                })
                .collect::<Result<_>>()?,
            _ => return Err(obj.error(&field, "the answer must be a number, a boolean or lists of span ids")),
        };
        let question = one_line(question);
        let Some(family) = family_of(&question, &answers[0]) else {
            unlabelled += 1;
            continue;
        };
        let n = next.entry(family).or_default();
        let qid = QuestionId { family, index: *n };
        *n += 1;
        header.push(HeaderLine::Question { id: qid, text: question });
        header.extend(answers.into_iter().map(|text| HeaderLine::Answer { id: qid, text }));
    }
    Ok((R2vqRecipe { id, header, paragraphs }, unlabelled))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Families of the test questions.
    pub(crate) fn family(q: &str, _: &str) -> Option<u32> {
        if q.starts_with("What should") {
            Some(1)
        } else if q.starts_with("How many") {
            Some(0)
        } else {
            None
        }
    }

    #[test]
    fn release_lines_become_annotated_recipes_with_answers_as_text() {
        // Offsets count from 10 (the first step's start); "Cut onion in a bowl. Serve it." in one step.
        let line = serde_json::json!({
            "title": "Onions",
            "content": "1. Cut onion in a bowl. Serve it.",
            "steps_offset": [10], "sents_offset": [10, 13, 34],
            "ingredients": [
                {"offset": [[17, 22]], "aid": "T1", "mention": "onion", "name": "onion", "expression": "explicit", "ref_id": null},
                {"offset": [[40, 42]], "aid": "T2", "mention": "it", "name": "onion", "expression": "implicit", "ref_id": "T1"}
            ],
            "props": [{"offset": [[28, 32]], "aid": "T3", "mention": "bowl", "name": "bowl", "usage": "habitat", "orientation": "upright", "ref_id": null}],
            "verbs": [
                {"offset": [[13, 16]], "aid": "T4", "mention": "Cut", "name": "cut",
                 "implicit_props": [{"offset": [[-1, -1]], "aid": "T4-ip0", "mention": "knife", "name": "knife", "usage": "tool"}]},
                {"offset": [[34, 39]], "aid": "T5", "mention": "Serve", "name": "serve", "implicit_props": []}
            ],
            "events": [
                {"verb": {"aid": "T4"}, "ingredients": [{"aid": "T1"}], "props": [{"aid": "T3"}]},
                {"verb": {"aid": "T5"}, "ingredients": [{"aid": "T2"}], "props": []}
            ],
            "instantiations": [],
            "questions": [["What should be cut?", [["T1"], ["T2"]]], ["How many bowls are used?", 1], ["Is it?", true]]
        });
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r2vq.jsonl");
        std::fs::write(&p, format!("{line}\n")).unwrap();
        let (doc, unlabelled) = read_r2vq_2021(&p, &family).unwrap();
        assert_eq!(unlabelled, 1);
        let r = &doc.recipes[0];
        assert_eq!(r.id, "2021-L01");
        let sentences: Vec<&str> = r.paragraphs[0].sentences.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(sentences, ["1.", "Cut onion in a bowl.", "Serve it."]);
        let cut = &r.paragraphs[0].sentences[1].tokens;
        assert_eq!(cut[0].entity, EntityTag::Begin(EntityKind::Event));
        assert_eq!(cut[0].hidden[0].values[0].name, "knife", "implicit prop: hidden tool");
        assert_eq!((cut[1].part, &cut[1].entity), (Some(1), &EntityTag::Begin(EntityKind::ExplicitIngredient)));
        assert_eq!((cut[4].part, &cut[4].entity), (Some(1), &EntityTag::Begin(EntityKind::Habitat)));
        let meta = &r.paragraphs[0].sentences[1].metadata;
        assert_eq!(meta, &[("orientation".to_string(), "5=upright".to_string())], "the bowl's orientation");
        let it = &r.paragraphs[0].sentences[2].tokens[1];
        assert_eq!(it.coref, cut[1].coref, "ref_id: \"it\" is the onion");
        let qs = r.questions();
        assert_eq!((qs[0].answer.as_deref(), qs[0].alternatives.as_slice()), (Some("onion"), &["it".to_string()][..]));
        assert_eq!(qs[1].answer.as_deref(), Some("1"));
        // Written in the SemEval layout and read back: the same recipe.
        let back = crate::readers::r2vq_conllu::parse_r2vq_conllu(Path::new("x.csv"), &doc.to_conllu_string()).unwrap();
        assert_eq!(back, doc);
        // Bad offsets name the line and field.
        let mut bad = line.clone();
        bad["ingredients"][0]["offset"] = serde_json::json!([[5, 9]]);
        std::fs::write(&p, format!("{bad}\n")).unwrap();
        let e = read_r2vq_2021(&p, &family).unwrap_err().to_string();
        assert!(e.contains(":1") && e.contains("ingredients[0].offset"), "{e}");
        for extreme in [i64::MIN, i64::MAX] {
            let mut bad = line.clone();
            bad["ingredients"][0]["offset"] = serde_json::json!([[extreme, i64::MAX]]);
            bad["steps_offset"] = serde_json::json!([extreme]);
            std::fs::write(&p, format!("{bad}\n")).unwrap();
            assert!(read_r2vq_2021(&p, &family).is_err(), "offsets at {extreme}");
        }
        // A file without recipes is an error naming it (the SemEval layout could not hold what it reads).
        for empty in ["", "\n\n"] {
            std::fs::write(&p, empty).unwrap();
            let e = read_r2vq_2021(&p, &family).unwrap_err();
            assert!(matches!(e, Error::Empty { .. }) && e.to_string().contains("r2vq.jsonl"), "{e}");
        }
    }
}
