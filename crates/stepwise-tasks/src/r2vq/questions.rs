//! The question templates of the SemEval-2022 Task 9 release, and which families each can belong to.
//!
//! A question is parsed into its template and arguments (the ingredient, the event clauses...). Several families
//! share a template — "How do you cut the onion?" is an implicit tool (family 2, "by using a knife"), an
//! instrument (6), a manner (10) or a goal (14) question depending on what the annotation holds — so a template
//! names candidate families and the answering program decides. Unanswerable distractors (family 18) reuse every
//! template. Templates were read off the release's questions (test split, every family); family numbers as
//! [`stepwise_core::r2vq::FAMILIES`].

use std::sync::OnceLock;

use regex::Regex;

/// A question form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    /// "How many actions does it take to process the X?"
    CountActions,
    /// "How many times is the X used?" / "How many times the X is used?"
    CountUses,
    /// "How many Xs are used?"
    CountProps,
    /// "What should be V-ed [PREP the X]?"
    WhatShouldBe,
    /// "Where should you V the X?"
    WhereShould,
    /// "How do you V ...?" (also "How would you ...")
    HowDoYou,
    /// "How did you get the X?"
    HowDidYouGet,
    /// "What's in the X?"
    WhatsIn,
    /// "A and B, which comes first?"
    WhichFirst,
    /// "To what extent do you V ...?"
    ToWhatExtent,
    /// "For how long do you V ...?"
    ForHowLong,
    /// "Where do you V ...?"
    WhereDoYou,
    /// "By how much do you V ...?"
    ByHowMuch,
    /// "Why do you V ...?"
    WhyDoYou,
    /// "What do you V ... with[ ...]?"
    WhatWith,
    /// Any other "What do you V ...?" ("What do you cut the meat into?": train-file variants of the SRL families).
    WhatDoYou,
    /// "From where do you V ...?"
    FromWhere,
    /// "Where was the X before it was V-ed?"
    WhereWasBefore,
    /// "What does the X become?" (stepwise: what the ingredient is made into).
    WhatBecome,
    /// "Where is the X after step K?" (stepwise: steps from 1).
    WhereAfterStep,
    /// "What is the orientation of the X when you V ...?" (stepwise's family 19).
    Orientation,
    /// 2021 release: "What is used to V the X?" (the tool, named).
    WhatIsUsedTo,
    /// 2021 release: "Are there more Xs?" (more than one such prop).
    AreThereMore,
    /// 2021 release: "Are the X in step i and step j identical?" (steps from 0; the same entity or not).
    AreIdentical,
}

impl Template {
    /// The families whose questions take this form (besides 18, the unanswerable distractors, which take all).
    pub fn families(self) -> &'static [u32] {
        match self {
            Template::CountActions | Template::CountUses | Template::CountProps => &[0],
            Template::WhatShouldBe => &[1],
            Template::WhereShould => &[2],
            Template::HowDoYou => &[2, 6, 10, 14],
            Template::HowDidYouGet | Template::WhatsIn | Template::WhatBecome | Template::WhereAfterStep => &[3],
            Template::WhichFirst => &[4],
            Template::ToWhatExtent => &[5],
            Template::ForHowLong => &[7],
            Template::WhereDoYou => &[8, 12, 13],
            Template::ByHowMuch => &[9],
            Template::WhyDoYou => &[11, 15],
            Template::WhatWith => &[12, 13],
            Template::WhatDoYou => &[5, 12, 13, 14],
            Template::FromWhere => &[16],
            Template::WhereWasBefore => &[17],
            Template::WhatIsUsedTo => &[2],
            Template::Orientation => &[19],
            Template::AreThereMore => &[0],
            Template::AreIdentical => &[3],
        }
    }
}

/// A parsed question: its template and the text slots the template names (in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedQuestion {
    pub template: Template,
    /// E.g. `["minced meat"]` for CountActions, `["cutting the stem", "adding the tomatoes"]` for WhichFirst,
    /// `["cut the carrots and zucchini"]` (the clause after "do you") for HowDoYou.
    pub args: Vec<String>,
}

fn patterns() -> &'static [(Template, Regex)] {
    static P: OnceLock<Vec<(Template, Regex)>> = OnceLock::new();
    P.get_or_init(|| {
        let t = |template, re: &str| (template, Regex::new(&format!("(?i)^{re}\\s*\\?\\s*$")).expect("valid pattern"));
        vec![
            t(Template::CountActions, r"how many actions does it take to process (?:the )?(.+?)"),
            t(Template::CountUses, r"how many times (?:is )?(?:the )?(.+?) (?:is )?used"),
            t(Template::CountProps, r"how many (.+?) are used"),
            t(Template::WhatShouldBe, r"what should be (.+?)"),
            t(Template::WhereShould, r"where should you (.+?)"),
            t(Template::HowDidYouGet, r"how did you get (?:the )?(.+?)"),
            t(Template::WhatsIn, r"what(?:'s| is) in (?:the )?(.+?)"),
            t(Template::WhichFirst, r"(.+?), which comes first"),
            t(Template::ToWhatExtent, r"to what extent do you (.+?)"),
            t(Template::ForHowLong, r"for how long do you (.+?)"),
            t(Template::ByHowMuch, r"by how much do you (.+?)"),
            t(Template::FromWhere, r"from where do you (.+?)"),
            t(Template::WhereWasBefore, r"where was (?:the )?(.+?) before it was (.+?)"),
            t(Template::WhatIsUsedTo, r"what is used to (.+?)"),
            t(Template::Orientation, r"what is the orientation of (?:the )?(.+?) when you (.+?)"),
            t(Template::WhatBecome, r"what does (?:the )?(.+?) become"),
            t(Template::WhereAfterStep, r"where is (?:the )?(.+?) after step (\d+)"),
            t(Template::AreThereMore, r"are there more (.+?)"),
            t(Template::AreIdentical, r"are (?:the )?(.+?) in step (\d+) and step (\d+) identical"),
            t(Template::WhereDoYou, r"where do you (.+?)"),
            t(Template::WhyDoYou, r"why do you (.+?)"),
            t(Template::WhatWith, r"what do you (.+?) with(?: .+?)?"),
            t(Template::WhatDoYou, r"what do you (.+?)"),
            t(Template::HowDoYou, r"how (?:do|would) you (.+?)"),
        ]
    })
}

/// Parse a question; `None` when no template matches.
pub fn parse_question(question: &str) -> Option<ParsedQuestion> {
    let q = question.trim();
    for (template, re) in patterns() {
        if let Some(c) = re.captures(q) {
            let mut args: Vec<String> = c.iter().skip(1).flatten().map(|m| m.as_str().trim().to_string()).collect();
            if *template == Template::WhichFirst {
                // "A and B": the two event clauses; the split is at the " and " whose right side starts with a
                // gerund (clauses themselves contain "and": "cutting carrots and zucchini").
                args = split_events(&args[0]).map(|(a, b)| vec![a, b]).unwrap_or(args);
            }
            return Some(ParsedQuestion { template: *template, args });
        }
    }
    None
}

/// The family of an answered question that has no family id (HIT-QMUL's train QA strings): "N/A" is 18; a
/// template with one candidate family gives it; otherwise the answer's form decides ("by using a ..." → 2, "to ..."
/// → 12, "with ..." → 13, "so ..." → 11, "into"/"until" → 5). Families 6, 10 and 14 share "How do you ...?" and
/// clause answers, so such questions are counted as 6. `None` when no template matches.
pub fn family_of_answered(question: &str, answer: &str) -> Option<u32> {
    let template = parse_question(question)?.template;
    let a = answer.trim().to_ascii_lowercase();
    if a == "n/a" {
        return Some(18);
    }
    let starts = |p: &str| a.starts_with(p);
    Some(match template {
        Template::HowDoYou if starts("by using") => 2,
        Template::HowDoYou => 6,
        Template::WhereDoYou | Template::WhatWith | Template::WhatDoYou if starts("with ") => 13,
        Template::WhereDoYou | Template::WhatWith | Template::WhatDoYou if starts("to ") => 12,
        Template::WhatDoYou if starts("into ") || starts("until ") => 5,
        Template::WhereDoYou => 8,
        Template::WhyDoYou if starts("so ") => 11,
        Template::WhyDoYou => 15,
        t => t.families()[0],
    })
}

/// Split "cutting x and y and adding z" at the last " and " followed by an -ing word (the second event).
fn split_events(s: &str) -> Option<(String, String)> {
    // ASCII lower-casing keeps byte offsets (full Unicode lower-casing can change lengths: 'İ').
    let lower = s.to_ascii_lowercase();
    let mut best = None;
    let mut from = 0;
    while let Some(i) = lower[from..].find(" and ") {
        let at = from + i;
        let next = lower[at + 5..].split_whitespace().next().unwrap_or("");
        if next.ends_with("ing") && at > 0 {
            best = Some(at);
        }
        from = at + 5;
    }
    best.map(|at| (s[..at].trim().to_string(), s[at + 5..].trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_of_every_form_parse_into_template_and_arguments() {
        let p = |q: &str| parse_question(q).unwrap();
        assert_eq!(p("How many actions does it take to process the minced meat?").args, ["minced meat"]);
        assert_eq!(p("How many spoons are used?").template, Template::CountProps);
        assert_eq!(p("How many times is the knife used?").args, ["knife"]);
        let q =
            p("Cutting the stem into bite - size pieces and sauting minced meat in a separate pan, which comes first?");
        assert_eq!(q.template, Template::WhichFirst);
        assert_eq!(q.args, ["Cutting the stem into bite - size pieces", "sauting minced meat in a separate pan"]);
        let q = p("Cutting carrots and zucchini into cubes and adding the tinned tomatoes, which comes first?");
        assert_eq!(q.args, ["Cutting carrots and zucchini into cubes", "adding the tinned tomatoes"]);
        assert_eq!(p("Where was the bacon before it was fried?").args, ["bacon", "fried"]);
        assert_eq!(p("What do you serve the vegetables and minced meat casserole with?").template, Template::WhatWith);
        assert_eq!(p("How do you cut the carrots and zucchini?").template.families(), [2, 6, 10, 14]);
        assert_eq!(p("What's in the ingred mix?").args, ["ingred mix"]);
        assert!(parse_question("Is this a question about recipes").is_none());
        assert_eq!(p("What is used to beat the egg?").args, ["beat the egg"]);
        assert_eq!(p("Are there more ovens?").template, Template::AreThereMore);
        assert_eq!(p("What does the onion become?").args, ["onion"]);
        assert_eq!(p("What is the orientation of the knife when you cut the onion?").args, ["knife", "cut the onion"]);
        assert_eq!(p("Where is the onion after step 2?").args, ["onion", "2"]);
        assert_eq!(p("Are the water in step 0 and step 2 identical?").args, ["water", "0", "2"]);
        // Non-ASCII letters whose lower case is longer must not shift the split.
        let q = p("İ and éating x and Öpening y, which comes first?");
        assert_eq!(q.args, ["İ and éating x", "Öpening y"]);
    }
}
