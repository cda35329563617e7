//! R2VQ recipes in the SemEval-2022 Task 9 CoNLL-U-like layout (types and writer in [`stepwise_core::r2vq`];
//! column specification in the organisers' README.txt). Each recipe becomes a procedure whose steps are the
//! `::stepNN` paragraphs (sentence texts joined) and whose ingredients are the ingredient list's lines, so the rest
//! of stepwise works on R2VQ recipes; the full annotation stays available through [`read_r2vq_conllu`].
//!
//! Errors name the file, the line, the character column of the field and the column's name.

use std::path::{Path, PathBuf};

use stepwise_core::r2vq::{
    ARG_COLUMNS, COLUMNS, EntityRef, HeaderLine, HiddenArg, HiddenRole, Paragraph, QuestionId, R2vqDocument,
    R2vqRecipe, Sentence, SrlTag, Token, canonical_number,
};
use stepwise_core::{Error, Location, Procedure, Result, Step};

use crate::format::{Format, Ingested, Origin, ReadOptions, Sniff, skip_ws};

pub struct R2vqConllu;

impl Format for R2vqConllu {
    fn name(&self) -> &'static str {
        "r2vq-conllu"
    }

    fn describe(&self) -> &'static str {
        "R2VQ (SemEval-2022 Task 9) CoNLL-U-like recipes: `# newdoc id`, questions, 20 tab-separated columns per \
         token; steps become procedure steps"
    }

    fn sniff(&self, _path: &Path, head: &[u8]) -> Sniff {
        let h = skip_ws(head);
        if !h.starts_with(b"# newdoc id =") {
            return Sniff::No;
        }
        let twenty_columns =
            h.split(|&b| b == b'\n').any(|l| !l.starts_with(b"#") && l.split(|&b| b == b'\t').count() == 20);
        if twenty_columns { Sniff::Yes } else { Sniff::Maybe }
    }

    fn read(&self, inputs: &[PathBuf], opts: &ReadOptions) -> Result<Ingested> {
        let mut out = Ingested::default();
        for path in inputs {
            let doc = read_r2vq_conllu(path)?;
            let image_base = opts.image_base(path);
            for r in &doc.recipes {
                out.push(
                    recipe_procedure(r),
                    Origin { file: path.clone(), record: format!("newdoc {}", r.id), image_base: image_base.clone() },
                );
            }
        }
        Ok(out)
    }
}

/// A recipe as a stepwise procedure: steps from the step paragraphs, ingredients from the list, the source URL
/// and a title from its last path segment.
pub fn recipe_procedure(r: &R2vqRecipe) -> Procedure {
    let url = r.metadata("url").map(str::to_string);
    let title = url.as_deref().and_then(|u| u.trim_end_matches('/').rsplit('/').next()).and_then(|slug| {
        let t = slug.replace(['-', '_'], " ");
        (!t.trim().is_empty()).then(|| t.trim().to_string())
    });
    let ingredients: Vec<String> = r.ingredient_lines().into_iter().map(str::to_string).collect();
    Procedure {
        id: r.id.clone(),
        title,
        source: url,
        lang: Some("en".into()),
        category: Some("recipe".into()),
        steps: r.steps().map(|p| Step { text: Some(p.text()), ..Step::default() }).collect(),
        ingredients: (!ingredients.is_empty()).then_some(ingredients),
        ..Procedure::default()
    }
}

/// Read a whole file in the SemEval layout.
pub fn read_r2vq_conllu(path: &Path) -> Result<R2vqDocument> {
    let text = stepwise_core::json::read_text(path)?;
    parse_r2vq_conllu(path, &text)
}

/// A sentence being read, with the line of each token (for errors found once the sentence is complete).
struct Pending {
    sentence: Sentence,
    lines: Vec<usize>,
    /// Line of `# sent_id`.
    start: usize,
    has_text: bool,
    /// Tokens may follow (no blank line since `# sent_id`).
    open: bool,
}

/// Whether `path` is a file in the SemEval layout (it starts with `# newdoc id =`).
pub fn is_r2vq_conllu(path: &Path) -> bool {
    path.is_file()
        && crate::format::read_head(path, 64).is_ok_and(|h| crate::format::skip_ws(&h).starts_with(b"# newdoc id ="))
}

/// Parse text in the SemEval layout read from `path` (named in errors).
pub fn parse_r2vq_conllu(path: &Path, text: &str) -> Result<R2vqDocument> {
    // A last line of only a carriage return is a blank line without its "\n". No file the writer makes ends on an
    // unterminated blank line, so it counts as terminated: what reads writes back and reads again the same.
    let final_newline = text.ends_with('\n') || text.rsplit('\n').next() == Some("\r");
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut recipes: Vec<R2vqRecipe> = Vec::new();
    let mut first_line_of: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut pending: Option<Pending> = None;
    let at = |line: usize, column: Option<usize>| Location::Line { line, column };
    let syntax =
        |line: usize, message: String| Error::Syntax { path: path.to_path_buf(), location: at(line, None), message };

    for (i, raw) in body.split('\n').enumerate() {
        let line_no = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.contains('\r') {
            // A carriage return inside a value could not be written back as read.
            return Err(syntax(line_no, "a carriage return inside the line".into()));
        }
        if line.is_empty() {
            if let Some(p) = pending.as_mut() {
                p.sentence.blank_lines_after += 1;
                p.open = false;
            }
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if let Some(id) = value_of(comment, "newdoc id") {
                finish(path, &mut pending, &mut recipes)?;
                if id.is_empty() {
                    return Err(syntax(line_no, "`# newdoc id =` without an id".into()));
                }
                if let Some(first) = first_line_of.insert(id.to_string(), line_no) {
                    return Err(Error::Duplicate {
                        id: id.to_string(),
                        first: format!("{}:{first}", path.display()),
                        second: format!("{}:{line_no}", path.display()),
                    });
                }
                recipes.push(R2vqRecipe { id: id.to_string(), ..R2vqRecipe::default() });
                continue;
            }
            let Some(recipe) = recipes.last_mut() else {
                return Err(syntax(line_no, "a comment before the first `# newdoc id = ...` line".into()));
            };
            if let Some(id) = value_of(comment, "newpar id") {
                finish(path, &mut pending, &mut recipes)?;
                let recipe = recipes.last_mut().ok_or_else(|| syntax(line_no, "no recipe".into()))?;
                recipe.paragraphs.push(Paragraph { id: id.to_string(), sentences: Vec::new() });
            } else if let Some(id) = value_of(comment, "sent_id") {
                if recipe.paragraphs.is_empty() {
                    return Err(syntax(line_no, "`# sent_id` before the recipe's first `# newpar id`".into()));
                }
                finish(path, &mut pending, &mut recipes)?;
                pending = Some(Pending {
                    sentence: Sentence { id: id.to_string(), ..Sentence::default() },
                    lines: Vec::new(),
                    start: line_no,
                    has_text: false,
                    open: true,
                });
            } else if let Some(t) = value_of(comment, "text") {
                match pending.as_mut() {
                    Some(p) if p.open && p.sentence.tokens.is_empty() && !p.has_text => {
                        p.sentence.text = t.to_string();
                        p.has_text = true;
                    }
                    _ => return Err(syntax(line_no, "`# text` outside a sentence header (after `# sent_id`)".into())),
                }
            } else if let Some((kind, rest)) = comment
                .strip_prefix(" question ")
                .map(|r| ("question", r))
                .or_else(|| comment.strip_prefix(" answer ").map(|r| ("answer", r)))
            {
                // Kept in the header: after a paragraph it could not be written back where it was read.
                if !recipe.paragraphs.is_empty() {
                    return Err(syntax(
                        line_no,
                        format!("`# {kind}` belongs to the recipe header (before its first `# newpar id`)"),
                    ));
                }
                let (id, text) = rest
                    .split_once(" =")
                    .ok_or_else(|| syntax(line_no, format!("`# {kind} <family>-<index> = <text>` expected")))?;
                let id: QuestionId = id.parse().map_err(|e: String| syntax(line_no, e))?;
                let text = text.strip_prefix(' ').unwrap_or(text).to_string();
                // A repeated question id would make one of the two questions unreachable by predictions keyed by
                // id; a repeated answer id is another correct answer of the same question.
                let repeated = kind == "question"
                    && recipe
                        .header
                        .iter()
                        .any(|h| matches!(h, HeaderLine::Question { id: other, .. } if *other == id));
                if repeated {
                    return Err(syntax(line_no, format!("a second `# {kind} {id}` in recipe {}", recipe.id)));
                }
                recipe.header.push(if kind == "question" {
                    HeaderLine::Question { id, text }
                } else {
                    HeaderLine::Answer { id, text }
                });
            } else if let Some(rest) = comment.strip_prefix(" metadata:") {
                let (key, value) = rest
                    .split_once(" =")
                    .ok_or_else(|| syntax(line_no, "`# metadata:<key> = <value>` expected".into()))?;
                let (key, value) = (key.to_string(), value.strip_prefix(' ').unwrap_or(value).to_string());
                match pending.as_mut() {
                    Some(p) if p.open && p.sentence.tokens.is_empty() && p.has_text => {
                        p.sentence.metadata.push((key, value));
                    }
                    _ if recipe.paragraphs.is_empty() => recipe.header.push(HeaderLine::Metadata { key, value }),
                    _ => {
                        return Err(syntax(
                            line_no,
                            "`# metadata` belongs to the recipe header or after a sentence's `# text`".into(),
                        ));
                    }
                }
            } else if recipe.paragraphs.is_empty() {
                recipe.header.push(HeaderLine::Other(line.to_string()));
            } else {
                return Err(syntax(line_no, format!("unknown comment {line:?} inside the recipe's paragraphs")));
            }
            continue;
        }
        // A token line. After a blank line it starts a group continuing the previous sentence (see
        // `Sentence::continues`).
        if let Some(p) = pending.as_ref().filter(|p| !p.open && !p.sentence.tokens.is_empty()) {
            let (id, text, start) = (p.sentence.id.clone(), p.sentence.text.clone(), line_no);
            finish(path, &mut pending, &mut recipes)?;
            pending = Some(Pending {
                sentence: Sentence { id, text, continues: true, ..Sentence::default() },
                lines: Vec::new(),
                start,
                has_text: true,
                open: true,
            });
        }
        let Some(p) = pending.as_mut().filter(|p| p.open) else {
            let why = match &pending {
                Some(p) if p.sentence.tokens.is_empty() => "a blank line separates it from its `# sent_id`/`# text`",
                _ => "no `# sent_id` line before it",
            };
            return Err(syntax(line_no, format!("a token line outside a sentence ({why})")));
        };
        let token = parse_token(path, line_no, line, p.sentence.tokens.len() + 1)?;
        p.sentence.tokens.push(token);
        p.lines.push(line_no);
    }
    finish(path, &mut pending, &mut recipes)?;
    if recipes.is_empty() {
        return Err(Error::Empty { path: path.to_path_buf(), what: "no `# newdoc id = ...` recipe".into() });
    }
    Ok(R2vqDocument { recipes, final_newline })
}

/// `value_of(" newdoc id = x", "newdoc id")` is `Some("x")`.
fn value_of<'a>(comment: &'a str, key: &str) -> Option<&'a str> {
    let rest = comment.strip_prefix(' ')?.strip_prefix(key)?.strip_prefix(" =")?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// Check the sentence being read and add it to the last paragraph.
fn finish(path: &Path, pending: &mut Option<Pending>, recipes: &mut [R2vqRecipe]) -> Result<()> {
    let Some(p) = pending.take() else { return Ok(()) };
    let field = |line: usize, column: &str, message: String| {
        Error::field(path, Location::Line { line, column: None }, column, message)
    };
    if !p.has_text {
        return Err(field(p.start, "# text", format!("sentence {} has no `# text = ...` line", p.sentence.id)));
    }
    let n = p.sentence.tokens.len();
    for (t, &line) in p.sentence.tokens.iter().zip(&p.lines) {
        for (name, v) in [("PART", t.part), ("RES", t.res)] {
            if let Some(head) = v.filter(|&h| h == 0 || h > n) {
                return Err(field(line, name, format!("token {head} does not exist (the sentence has {n} tokens)")));
            }
        }
    }
    let predicates = p.sentence.tokens.iter().filter(|t| t.predicate.is_some()).count();
    if predicates > ARG_COLUMNS {
        return Err(field(
            p.start,
            "PREDICATE",
            format!("{predicates} predicates; the layout has {ARG_COLUMNS} ARG columns"),
        ));
    }
    let paragraph = recipes
        .last_mut()
        .and_then(|r| r.paragraphs.last_mut())
        .ok_or_else(|| field(p.start, "# sent_id", "a sentence outside a paragraph".into()))?;
    paragraph.sentences.push(p.sentence);
    Ok(())
}

/// Parse one token line; `expected_id` is its position in the sentence.
fn parse_token(path: &Path, line_no: usize, line: &str, expected_id: usize) -> Result<Token> {
    let fields: Vec<&str> = line.split('\t').collect();
    if fields.len() != COLUMNS.len() {
        return Err(Error::Syntax {
            path: path.to_path_buf(),
            location: Location::Line { line: line_no, column: None },
            message: format!(
                "{} tab-separated columns; the SemEval layout has {} ({})",
                fields.len(),
                COLUMNS.len(),
                COLUMNS.join(" ")
            ),
        });
    }
    // 1-based character column where each field starts.
    let mut starts = Vec::with_capacity(fields.len());
    let mut c = 1;
    for f in &fields {
        starts.push(c);
        c += f.chars().count() + 1;
    }
    let err = |k: usize, message: String| {
        Error::field(path, Location::Line { line: line_no, column: Some(starts[k]) }, COLUMNS[k], message)
    };
    let opt_index = |k: usize| -> Result<Option<usize>> {
        match fields[k] {
            "_" => Ok(None),
            v => canonical_number(v)
                .map(|n| Some(n as usize))
                .ok_or_else(|| err(k, format!("{v:?} is neither _ nor a token number"))),
        }
    };
    match canonical_number(fields[0]) {
        Some(id) if id as usize == expected_id => {}
        _ => return Err(err(0, format!("{:?}: token {expected_id} of the sentence expected", fields[0]))),
    }
    // FORM and LEMMA may be empty: the tokenizer's whitespace tokens (UPOS SPACE) have neither.
    let entity = fields[4].parse().map_err(|e: String| err(4, e))?;
    let hidden = match fields[7] {
        "_" => Vec::new(),
        v => v
            .split('|')
            .map(|item| {
                let (role, values) = item
                    .split_once('=')
                    .ok_or_else(|| err(7, format!("{item:?} is not <Role>=<value>[:<value>...]")))?;
                let role = HiddenRole::ALL.into_iter().find(|r| r.as_str() == role).ok_or_else(|| {
                    err(
                        7,
                        format!(
                            "unknown role {role:?} (one of {})",
                            HiddenRole::ALL.map(HiddenRole::as_str).join(", ")
                        ),
                    )
                })?;
                let values = values
                    .split(':')
                    .map(|x| x.parse::<EntityRef>().map_err(|e| err(7, format!("{item:?}: {e}"))))
                    .collect::<Result<Vec<_>>>()?;
                Ok(HiddenArg { role, values })
            })
            .collect::<Result<Vec<_>>>()?,
    };
    let coref = match fields[8] {
        "_" => None,
        v => Some(v.parse::<EntityRef>().map_err(|e| err(8, e))?),
    };
    let predicate = match fields[9] {
        "_" => None,
        v => Some(v.to_string()),
    };
    let mut args: [SrlTag; ARG_COLUMNS] = Default::default();
    for (j, slot) in args.iter_mut().enumerate() {
        *slot = fields[10 + j].parse().map_err(|e: String| err(10 + j, e))?;
    }
    Ok(Token {
        form: fields[1].to_string(),
        lemma: fields[2].to_string(),
        upos: fields[3].to_string(),
        entity,
        part: opt_index(5)?,
        res: opt_index(6)?,
        hidden,
        coref,
        predicate,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::r2vq::{EntityKind, EntityTag, TokenPos};

    fn row(cols: &[&str]) -> String {
        let mut all: Vec<&str> = cols.to_vec();
        all.resize(20, "_");
        all.join("\t")
    }

    fn sample() -> String {
        let mut s = String::new();
        s.push_str("# newdoc id = r-1\n# question 4-0 = Cutting x and adding y, which comes first?\n");
        s.push_str("# answer 4-0 = the first event\n# metadata:url = https://example.org/wiki/Red_Soup\n");
        s.push_str("# newpar id = r-1::ingredients\n# sent_id = r-1::ingredients::sent01\n# text = 2 carrots\n");
        s.push_str(&row(&["1", "2", "2", "NUM"]));
        s.push('\n');
        s.push_str(&row(&["2", "carrots", "carrot", "NOUN"]));
        s.push_str("\n\n# newpar id = r-1::step01\n# sent_id = r-1::step01::sent01\n# text = Cut carrots.\n");
        s.push_str("# metadata:stop_sent = STEP\n");
        s.push_str(&row(&[
            "1",
            "Cut",
            "cut",
            "VERB",
            "B-EVENT",
            "_",
            "_",
            "Tool=knife.1.1.1|Drop=a.1.1.2:b",
            "_",
            "CUT",
            "B-V",
        ]));
        s.push('\n');
        s.push_str(&row(&[
            "2",
            "carrots",
            "carrot",
            "NOUN",
            "B-EXPLICITINGREDIENT",
            "1",
            "_",
            "_",
            "carrots.1.1.2",
            "_",
            "B-Patient",
        ]));
        s.push('\n');
        s.push_str(&row(&["3", ".", ".", "PUNCT", "O"]));
        s.push_str("\n\n\n");
        s
    }

    #[test]
    fn a_recipe_reads_into_its_annotation_and_writes_back_byte_for_byte() {
        let text = sample();
        let doc = parse_r2vq_conllu(Path::new("x.csv"), &text).unwrap();
        assert_eq!(doc.to_conllu_string(), text);
        let r = &doc.recipes[0];
        assert_eq!(r.questions()[0].answer.as_deref(), Some("the first event"));
        let cut = &r.paragraphs[1].sentences[0].tokens[0];
        assert_eq!(cut.entity, EntityTag::Begin(EntityKind::Event));
        assert_eq!(cut.hidden[0].values[0].at, Some(TokenPos { step: 1, sentence: 1, token: 1 }));
        assert_eq!(cut.hidden[1].values[1], EntityRef { name: "b".into(), at: None });
        assert_eq!(r.paragraphs[1].sentences[0].tokens[1].part, Some(1));
        let p = recipe_procedure(r);
        assert_eq!(p.title.as_deref(), Some("Red Soup"));
        assert_eq!(p.steps.len(), 1);
        assert_eq!(p.steps[0].text.as_deref(), Some("Cut carrots."));
        assert_eq!(p.ingredients, Some(vec!["2 carrots".to_string()]));
        // Without the final newline (the shared train sample ends so).
        let trimmed = text.trim_end_matches('\n');
        let doc = parse_r2vq_conllu(Path::new("x.csv"), trimmed).unwrap();
        assert!(!doc.final_newline);
        assert_eq!(doc.to_conllu_string(), trimmed);
        // Ending on a blank line of only "\r": that line is terminated, so the document writes back and reads the same.
        for ending in ["\r", "\n\r"] {
            let doc = parse_r2vq_conllu(Path::new("x.csv"), &format!("{text}{ending}")).unwrap();
            let last = doc.recipes[0].paragraphs[1].sentences.last().map(|s| s.blank_lines_after);
            assert_eq!((doc.final_newline, last), (true, Some(2 + ending.len())), "{ending:?}");
            assert_eq!(parse_r2vq_conllu(Path::new("y.csv"), &doc.to_conllu_string()).unwrap(), doc, "{ending:?}");
        }
        assert_eq!(R2vqConllu.sniff(Path::new("x.csv"), text.as_bytes()), Sniff::Yes);

        // A token group after a blank line continues the sentence before it, and is written back without header.
        let split = text.replacen("\n3\t.\t.", "\n\n1\t.\t.", 1);
        let doc = parse_r2vq_conllu(Path::new("x.csv"), &split).unwrap();
        let sentences = &doc.recipes[0].paragraphs[1].sentences;
        assert_eq!(sentences.len(), 2);
        assert!(sentences[1].continues && sentences[1].id == sentences[0].id);
        assert_eq!(doc.recipes[0].paragraphs[1].text(), "Cut carrots.");
        assert_eq!(doc.to_conllu_string(), split);
    }

    #[test]
    fn malformed_lines_are_errors_naming_line_column_and_field() {
        let text = sample();
        let bad = |from: &str, to: &str| {
            let t = text.replacen(from, to, 1);
            parse_r2vq_conllu(Path::new("r.csv"), &t).unwrap_err().to_string()
        };
        let e = bad("B-EXPLICITINGREDIENT", "B-SPICE");
        assert!(e.starts_with("r.csv:16:") && e.contains("`ENTITY`") && e.contains("EXPLICITINGREDIENT"), "{e}");
        let e = bad("\t1\t_\t_\tcarrots.1.1.2", "\t9\t_\t_\tcarrots.1.1.2");
        assert!(e.contains("r.csv:16") && e.contains("`PART`") && e.contains("token 9 does not exist"), "{e}");
        let e = bad("Tool=knife", "Spoon=knife");
        assert!(e.contains("`HIDDEN`") && e.contains("unknown role \"Spoon\""), "{e}");
        let e = bad("2\tcarrots\tcarrot", "3\tcarrots\tcarrot");
        assert!(e.contains("r.csv:9:1") && e.contains("`ID`"), "{e}");
        let e = bad("\tB-Patient", "\tPatient");
        assert!(e.contains("`ARG1`"), "{e}");
        let e = bad("# question 4-0", "# question four");
        assert!(e.contains("r.csv:2") && e.contains("<family>-<index>"), "{e}");
        let e = bad("# text = Cut carrots.\n# metadata:stop_sent = STEP\n", "");
        assert!(e.contains("no `# text"), "{e}");
        let e = bad("\tNOUN\tB-EXPL", "\tNOUN\tB-EXPL\textra");
        assert!(e.contains("21 tab-separated columns"), "{e}");
        let e = parse_r2vq_conllu(Path::new("r.csv"), &format!("{text}{text}")).unwrap_err().to_string();
        assert!(
            e.contains("duplicate id \"r-1\"") && e.contains("first at r.csv:1,") && e.contains("again at r.csv:20"),
            "{e}"
        );
        let e = bad("# metadata:url", "# question 4-0 = Again?\n# metadata:url");
        assert!(e.contains("r.csv:4") && e.contains("a second `# question 4-0` in recipe r-1"), "{e}");
        // A second answer line is another correct answer, and writes back as read.
        let two = text.replacen("# metadata:url", "# answer 4-0 = the second event\n# metadata:url", 1);
        let doc = parse_r2vq_conllu(Path::new("r.csv"), &two).unwrap();
        let q = &doc.recipes[0].questions()[0];
        assert_eq!(
            (q.answer.as_deref(), q.alternatives.as_slice()),
            (Some("the first event"), &["the second event".to_string()][..])
        );
        assert_eq!(doc.to_conllu_string(), two);
        // A question or answer after the first paragraph would be written back in the header (found in review).
        let e = parse_r2vq_conllu(Path::new("r.csv"), &format!("{}\n\n# answer 1-1 = x", text.trim_end()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("r.csv:19") && e.contains("`# answer` belongs to the recipe header"), "{e}");
        let e = bad("# text = Cut carrots.", "# text = Cut carrots.\r\r");
        assert!(e.contains("r.csv:13") && e.contains("carriage return"), "{e}");
        let e = bad("# metadata:stop_sent = STEP\n", "# metadata:stop_sent = STEP\n\n");
        assert!(e.contains("a blank line separates it"), "{e}");
        let e = parse_r2vq_conllu(Path::new("r.csv"), "1\tx\n").unwrap_err();
        assert!(e.to_string().contains("outside a sentence"), "{e}");
        assert!(matches!(parse_r2vq_conllu(Path::new("r.csv"), "\n\n"), Err(Error::Empty { .. })));
    }
}
