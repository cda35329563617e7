//! Step titles as choices: RecipeQA removes step numbers from titles (§3) so that a choice cannot be placed by
//! its number ("Step 3: Mix" → "Mix").

const STEP_WORDS: &[&str] = &["step", "steps", "stage", "part", "phase"];
const NUMBER_WORDS: &[&str] = &[
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "final",
    "last",
];
const SEPARATORS: &[char] = &[':', '.', ')', '-', '–', '—', '#', '|', '/', ','];

/// A title without a leading step number: `Step 3: Mix`, `STEP #3 - Mix`, `Step three. Mix`, `3. Mix`, `3) Mix`,
/// `#3 Mix` all become `Mix`. A number that is part of the title ("2 Cups of Flour", "1.5 kg") is kept. The result
/// is trimmed and may be empty (a title that was only a number).
pub fn strip_step_number(title: &str) -> String {
    let t = title.trim();
    let rest = strip_step_word_prefix(t).or_else(|| strip_bare_number_prefix(t)).unwrap_or(t);
    collapse_whitespace(rest)
}

/// `step` / `part` ... followed by a number (digits or a number word) and separators.
fn strip_step_word_prefix(t: &str) -> Option<&str> {
    let lower = t.to_lowercase();
    // Lowercasing can change byte lengths for non-ASCII text; only handle titles where it does not.
    if lower.len() != t.len() {
        return None;
    }
    let word_end = lower.find(|c: char| !c.is_alphabetic()).unwrap_or(lower.len());
    if !STEP_WORDS.contains(&&lower[..word_end]) {
        return None;
    }
    let after = skip_while(&lower, word_end, |c| c.is_whitespace() || c == '#' || c == '.');
    let num_end = if lower[after..].starts_with(|c: char| c.is_ascii_digit()) {
        skip_while(&lower, after, |c| c.is_ascii_digit())
    } else {
        let w_end = lower[after..].find(|c: char| !c.is_alphabetic()).map_or(lower.len(), |i| after + i);
        if !NUMBER_WORDS.contains(&&lower[after..w_end]) {
            return None;
        }
        w_end
    };
    // A step word must be followed by a number; the number must end the title or be followed by a separator or
    // space ("Step 3a" is left alone).
    if num_end == after || lower[num_end..].starts_with(|c: char| c.is_alphanumeric()) {
        return None;
    }
    let rest = skip_while(&lower, num_end, |c| c.is_whitespace() || SEPARATORS.contains(&c));
    Some(&t[rest..])
}

/// A bare leading number followed by a separator: `3. Mix`, `3) Mix`, `#3 Mix`, `3 - Mix`, `03: Mix`.
fn strip_bare_number_prefix(t: &str) -> Option<&str> {
    let hash = t.starts_with('#');
    let start = if hash { 1 } else { 0 };
    let num_end = skip_while(t, start, |c| c.is_ascii_digit());
    if num_end == start {
        return None;
    }
    let after_space = skip_while(t, num_end, char::is_whitespace);
    let next = t[after_space..].chars().next();
    let separated = match next {
        None => true,
        // "1.5 kg" is a quantity, "1. Mix" is a step number.
        Some('.') | Some(',') => !t[after_space + 1..].starts_with(|c: char| c.is_ascii_digit()),
        Some(c) if SEPARATORS.contains(&c) => true,
        Some(_) => hash,
    };
    if !separated {
        return None;
    }
    let rest = skip_while(t, num_end, |c| c.is_whitespace() || SEPARATORS.contains(&c));
    Some(&t[rest..])
}

fn skip_while(s: &str, from: usize, pred: impl Fn(char) -> bool) -> usize {
    s[from..].char_indices().find(|(_, c)| !pred(*c)).map_or(s.len(), |(i, _)| from + i)
}

fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The key under which two texts count as the same choice: case-folded, whitespace collapsed, trailing
/// punctuation dropped ("Enjoy!" = "enjoy").
pub fn content_key(s: &str) -> String {
    let lower = collapse_whitespace(&s.to_lowercase());
    lower.trim_end_matches(|c: char| c.is_ascii_punctuation()).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_numbers_are_removed() {
        for (input, want) in [
            ("Step 3: Mix the Flour", "Mix the Flour"),
            ("STEP #12 - Bake", "Bake"),
            ("step three. Serve", "Serve"),
            ("Step 1", ""),
            ("3. Mix", "Mix"),
            ("3) Mix", "Mix"),
            ("#3 Mix", "Mix"),
            ("03 -  Mix   well", "Mix well"),
            ("Part 2/ Frosting", "Frosting"),
            ("Final Step: Enjoy", "Final Step: Enjoy"),
            ("Step-by-step guide", "Step-by-step guide"),
        ] {
            assert_eq!(strip_step_number(input), want, "{input}");
        }
    }

    #[test]
    fn numbers_that_belong_to_the_title_stay() {
        for t in ["2 Cups of Flour", "1.5 kg of Beef", "3a Assemble", "Steps 3a", "Stepping Stones", "十 Mix"] {
            assert_eq!(strip_step_number(t), t, "{t}");
        }
    }

    #[test]
    fn content_keys_merge_trivial_variants() {
        assert_eq!(content_key("Enjoy!"), content_key("  enjoy "));
        assert_ne!(content_key("Mix"), content_key("Mix well"));
    }
}
