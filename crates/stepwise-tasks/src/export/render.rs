//! One question as a vision-language model sees it: a text prompt with `<image N>` placeholders, lettered
//! options, and the images the placeholders name, in order. The three export formats share this layout (the
//! dataset card documents it: [`LAYOUT_DOC`]).

use std::collections::BTreeSet;

use stepwise_core::taskset::PLACEHOLDER;
use stepwise_core::{Choice, Question, Task};

/// A question rendered for a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// Context and question, `<image N>` placeholders (1-based into `images`), no options.
    pub prompt: String,
    /// One text per choice (an image choice is its placeholder; an ordering choice the image numbers in order).
    pub options: Vec<String>,
    /// Image paths (as written in the question: relative to the corpus's image root), in placeholder order.
    pub images: Vec<String>,
    /// 0-based index of the right option.
    pub answer: usize,
}

/// The instruction after the options.
pub const ANSWER_INSTRUCTION: &str = "Answer with the option's letter from the given choices directly.";

/// Options a question may have: one letter each, A to Z.
pub const MAX_OPTIONS: usize = 26;

/// The option letter of choice `i` (A … Z; [`render`] refuses questions with more than [`MAX_OPTIONS`]).
pub fn letter(i: usize) -> String {
    char::from_u32('A' as u32 + i.min(MAX_OPTIONS - 1) as u32).map_or_else(String::new, |c| c.to_string())
}

impl Rendered {
    /// The whole text a model reads: the prompt, the options as `A. …` lines, the answer instruction.
    pub fn full_prompt(&self) -> String {
        let mut s = self.prompt.clone();
        s.push_str("\nOptions:\n");
        for (i, o) in self.options.iter().enumerate() {
            s.push_str(&format!("{}. {o}\n", letter(i)));
        }
        s.push_str(ANSWER_INSTRUCTION);
        s
    }

    pub fn answer_letter(&self) -> String {
        letter(self.answer)
    }
}

/// Images numbered in order of first mention.
#[derive(Default)]
struct Images(Vec<String>);

impl Images {
    fn tag(&mut self, path: &str) -> String {
        let n = match self.0.iter().position(|p| p == path) {
            Some(i) => i + 1,
            None => {
                self.0.push(path.to_string());
                self.0.len()
            }
        };
        format!("<image {n}>")
    }
}

/// What the dataset card says about the layout (kept next to the code that makes it).
pub const LAYOUT_DOC: &str = "\
Every question is one prompt with `<image N>` placeholders (1-based positions in the `images` list; an image \
used twice has one number) followed by lettered options. `prompt` holds the context and the question, `options` \
the option texts; the full text a model reads is `prompt`, a line `Options:`, one line `A. …` per option, and \
the line `Answer with the option's letter from the given choices directly.` The context is the recipe's steps \
as the task gives them (`Step k: title. body <image N>`, in recipe order). Per task:

- **textual_cloze**: the steps' texts and images, then `Steps in order: 1. … 2. ___ …` (the question's titles or \
texts) with the missing one shown as `___`; options are titles or texts.
- **visual_cloze**: the steps' texts, then `Step images in order: <image 1> ___ <image 2> …`; options are \
images (`A. <image 5>`).
- **visual_coherence**: the steps' texts, then `Step images in order: 1. <image 1> 2. <image 2> …` and the \
question which one does not belong; options are those images.
- **visual_ordering**: the steps' texts, then the images to order numbered `(1) <image 1> (2) <image 2> …` in \
an order drawn from a hash of the question id and the image paths (file names such as `r_1_0.jpg` would give the \
order away if sorted); options are orders of those numbers (`A. 3, 1, 4, 2`).

Any other task name is rendered as text from its `question` and `choice_list`, without images.";

/// Render `q`; errors name the field that does not fit the task's layout.
pub fn render(q: &Question) -> Result<Rendered, String> {
    let mut images = Images::default();
    let mut prompt = String::new();
    if let Some(t) = q.question_text.as_deref().filter(|t| !t.is_empty()) {
        prompt.push_str(t);
        prompt.push('\n');
    }
    if !q.context.is_empty() {
        prompt.push_str("Recipe steps:\n");
        for (k, step) in q.context.iter().enumerate() {
            let mut line = format!("Step {}:", k + 1);
            if let Some(t) = step.title.as_deref().filter(|t| !t.is_empty()) {
                line.push(' ');
                line.push_str(t.trim_end_matches('.'));
                line.push('.');
            }
            if let Some(b) = step.body.as_deref().filter(|b| !b.is_empty()) {
                line.push(' ');
                line.push_str(b);
            }
            for img in step.images.iter().flatten() {
                line.push(' ');
                line.push_str(&images.tag(img));
            }
            prompt.push_str(&line);
            prompt.push('\n');
        }
    }
    let items = |c: &Choice, i: usize| -> Result<String, String> {
        match c {
            Choice::Item(s) => Ok(s.clone()),
            Choice::Sequence(_) => Err(format!("choice_list[{i}]: a sequence where this task has single items")),
        }
    };
    if q.choice_list.len() > MAX_OPTIONS {
        return Err(format!(
            "choice_list: {} choices, more than the {MAX_OPTIONS} option letters",
            q.choice_list.len()
        ));
    }
    let options = match q.task_kind() {
        Some(Task::TextualCloze) => {
            let titles: Vec<String> = q
                .question
                .iter()
                .enumerate()
                .map(|(i, t)| format!("{}. {}", i + 1, if t == PLACEHOLDER { "___" } else { t }))
                .collect();
            prompt.push_str(&format!("Steps in order: {}", titles.join(" ")));
            q.choice_list.iter().enumerate().map(|(i, c)| items(c, i)).collect::<Result<Vec<_>, _>>()?
        }
        Some(Task::VisualCloze) => {
            let seq: Vec<String> =
                q.question.iter().map(|p| if p == PLACEHOLDER { "___".to_string() } else { images.tag(p) }).collect();
            prompt.push_str(&format!("Step images in order: {}", seq.join(" ")));
            let choices = q.choice_list.iter().enumerate().map(|(i, c)| items(c, i)).collect::<Result<Vec<_>, _>>()?;
            choices.iter().map(|p| images.tag(p)).collect()
        }
        Some(Task::VisualCoherence) => {
            let seq: Vec<String> =
                q.question.iter().enumerate().map(|(i, p)| format!("{}. {}", i + 1, images.tag(p))).collect();
            prompt.push_str(&format!(
                "Step images in order: {}\nWhich image does not belong to this recipe?",
                seq.join(" ")
            ));
            let choices = q.choice_list.iter().enumerate().map(|(i, c)| items(c, i)).collect::<Result<Vec<_>, _>>()?;
            choices.iter().map(|p| images.tag(p)).collect()
        }
        Some(Task::VisualOrdering) => {
            let mut pool = BTreeSet::new();
            for (i, c) in q.choice_list.iter().enumerate() {
                match c {
                    Choice::Sequence(seq) => pool.extend(seq.iter().cloned()),
                    Choice::Item(_) => {
                        return Err(format!("choice_list[{i}]: a single item where ordering has sequences"));
                    }
                }
            }
            // Numbered in a hash order: sorted paths (`r_1_0.jpg`, `r_2_0.jpg`, …) would spell out the answer.
            let mut numbered: Vec<String> = pool.into_iter().collect();
            numbered.sort_by_key(|p| stepwise_core::hash::hash64(&[q.qid.as_bytes(), p.as_bytes()]));
            let listed: Vec<String> =
                numbered.iter().enumerate().map(|(i, p)| format!("({}) {}", i + 1, images.tag(p))).collect();
            if let Some(t) = q.question.first().filter(|t| !t.is_empty() && q.question_text.as_deref() != Some(t)) {
                prompt.push_str(t);
                prompt.push('\n');
            }
            prompt.push_str(&format!("Images: {}", listed.join(" ")));
            q.choice_list
                .iter()
                .map(|c| {
                    c.items()
                        .iter()
                        .map(|p| (numbered.iter().position(|n| n == p).unwrap_or(0) + 1).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .collect()
        }
        None => {
            prompt.push_str(&q.question.join(" "));
            q.choice_list.iter().map(|c| c.items().join(", ")).collect()
        }
    };
    if q.answer >= options.len() {
        return Err(format!("answer: {} is out of range for {} choices", q.answer, options.len()));
    }
    Ok(Rendered { prompt, options, images: images.0, answer: q.answer })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;
    use stepwise_core::TaskSet;

    fn question(v: serde_json::Value) -> Question {
        TaskSet::from_json(&json!({ "data": [v] }), Path::new("t.json")).unwrap().questions.remove(0)
    }

    #[test]
    fn visual_cloze_numbers_each_image_once_and_options_point_at_them() {
        let q = question(json!({"qid": "1", "recipe_id": "r", "task": "visual_cloze",
            "context": [{"id": 1, "body": "Cut."}, {"id": 2, "title": "Fry", "body": "Fry it."}],
            "question": ["a.jpg", "@placeholder", "b.jpg"], "question_text": "Pick the missing image.",
            "choice_list": ["c.jpg", "a.jpg", "d.jpg", "e.jpg"], "answer": 0}));
        let r = render(&q).unwrap();
        assert_eq!(r.images, ["a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg"]);
        assert_eq!(
            r.prompt,
            "Pick the missing image.\nRecipe steps:\nStep 1: Cut.\nStep 2: Fry. Fry it.\n\
             Step images in order: <image 1> ___ <image 2>"
        );
        assert_eq!(r.options, ["<image 3>", "<image 1>", "<image 4>", "<image 5>"]);
        assert_eq!(r.answer_letter(), "A");
        assert!(
            r.full_prompt().ends_with("D. <image 5>\nAnswer with the option's letter from the given choices directly.")
        );
    }

    #[test]
    fn ordering_numbers_images_by_path_and_options_are_orders() {
        let q = question(json!({"qid": "4", "recipe_id": "r", "task": "visual_ordering", "context": [],
            "question": ["Choose the correct order"], "question_text": "What is the correct order?",
            "choice_list": [["z.jpg", "a.jpg", "m.jpg"], ["a.jpg", "m.jpg", "z.jpg"]], "answer": 1}));
        let r = render(&q).unwrap();
        let mut pool = r.images.clone();
        pool.sort();
        assert_eq!(pool, ["a.jpg", "m.jpg", "z.jpg"]);
        // Each option's numbers name its images in its order.
        for (option, choice) in r.options.iter().zip(&q.choice_list) {
            let named: Vec<&str> =
                option.split(", ").map(|n| r.images[n.parse::<usize>().unwrap() - 1].as_str()).collect();
            assert_eq!(named, choice.items());
        }
        assert!(r.prompt.ends_with("Choose the correct order\nImages: (1) <image 1> (2) <image 2> (3) <image 3>"));
        // Step-ordered file names are not numbered in step order for every question (that would give it away).
        let in_order = (0..40)
            .filter(|i| {
                let q = question(json!({"qid": format!("q{i}"), "recipe_id": "r", "task": "visual_ordering",
                    "question": ["Order"], "choice_list": [["r_1.jpg", "r_2.jpg", "r_3.jpg", "r_4.jpg"]], "answer": 0}));
                render(&q).unwrap().options[0] == "1, 2, 3, 4"
            })
            .count();
        assert!(in_order < 10, "{in_order} of 40 questions numbered in step order");
    }

    #[test]
    fn textual_cloze_shows_the_blank_and_context_images() {
        let q = question(json!({"qid": "t", "recipe_id": "r", "task": "textual_cloze",
            "context": [{"id": 1, "body": "B1", "images": ["s1.jpg"]}, {"id": 2, "body": "B2", "images": ["s2.jpg"]}],
            "question": ["Cut", "@placeholder"], "choice_list": ["Fry", "Bake"], "answer": 0}));
        let r = render(&q).unwrap();
        assert_eq!(
            r.prompt,
            "Recipe steps:\nStep 1: B1 <image 1>\nStep 2: B2 <image 2>\nSteps in order: 1. Cut 2. ___"
        );
        assert_eq!(r.options, ["Fry", "Bake"]);
    }

    #[test]
    fn a_sequence_choice_in_a_cloze_task_is_an_error_naming_the_field() {
        let q = question(json!({"qid": "x", "recipe_id": "r", "task": "visual_cloze", "question": ["@placeholder"],
            "choice_list": ["a.jpg", ["b.jpg"]], "answer": 0}));
        assert_eq!(render(&q).unwrap_err(), "choice_list[1]: a sequence where this task has single items");
        let many: Vec<String> = (0..27).map(|i| format!("c{i}")).collect();
        let q = question(json!({"qid": "y", "recipe_id": "r", "task": "textual_cloze", "question": ["@placeholder"],
            "choice_list": many, "answer": 0}));
        assert_eq!(render(&q).unwrap_err(), "choice_list: 27 choices, more than the 26 option letters");
    }
}
