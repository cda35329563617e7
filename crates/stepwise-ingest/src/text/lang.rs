//! A small language guesser for the cleaner's language filter, used when a procedure does not declare `lang`.
//!
//! It decides by script (Han without kana → `zh`, kana → `ja`, Hangul → `ko`, Cyrillic → `ru`, Arabic → `ar`,
//! Greek → `el`, Hebrew → `he`, Thai → `th`, Devanagari → `hi`) and, for Latin text, by the share of English
//! function words (`en` when at least 12% of the words are among the most common English words). Latin text in
//! another language gives `None` (undetermined) rather than a guess.

use super::tokenize::for_each_token;

const ENGLISH_FUNCTION_WORDS: &[&str] = &[
    "a", "about", "after", "all", "an", "and", "are", "as", "at", "be", "before", "but", "by", "can", "do", "for",
    "from", "have", "if", "in", "into", "is", "it", "make", "of", "on", "once", "or", "out", "over", "put", "so",
    "that", "the", "then", "this", "to", "until", "up", "when", "while", "will", "with", "you", "your",
];

/// Guess the language of `text` (an ISO 639-1 code), or `None` when the evidence is too thin or not covered.
pub fn detect_lang(text: &str) -> Option<&'static str> {
    let (mut han, mut kana, mut hangul, mut cyr, mut arabic, mut greek, mut hebrew, mut thai, mut deva, mut latin) =
        (0usize, 0usize, 0usize, 0usize, 0usize, 0usize, 0usize, 0usize, 0usize, 0usize);
    for c in text.chars() {
        match c as u32 {
            0x3040..=0x30FF => kana += 1,
            0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3134F => han += 1,
            0xAC00..=0xD7AF | 0x1100..=0x11FF => hangul += 1,
            0x0400..=0x04FF => cyr += 1,
            0x0600..=0x06FF => arabic += 1,
            0x0370..=0x03FF => greek += 1,
            0x0590..=0x05FF => hebrew += 1,
            0x0E00..=0x0E7F => thai += 1,
            0x0900..=0x097F => deva += 1,
            _ if c.is_alphabetic() => latin += 1,
            _ => {}
        }
    }
    let letters = han + kana + hangul + cyr + arabic + greek + hebrew + thai + deva + latin;
    if letters < 8 {
        return None;
    }
    let share = |n: usize| n * 2 > letters;
    if kana > 0 && share(han + kana) {
        return Some("ja");
    }
    let by_script = [
        (han, "zh"),
        (hangul, "ko"),
        (cyr, "ru"),
        (arabic, "ar"),
        (greek, "el"),
        (hebrew, "he"),
        (thai, "th"),
        (deva, "hi"),
    ];
    if let Some((_, code)) = by_script.iter().find(|(n, _)| share(*n)) {
        return Some(code);
    }
    if !share(latin) {
        return None;
    }
    let (mut words, mut function) = (0usize, 0usize);
    let mut buf = String::new();
    for_each_token(text, |t| {
        if t.has_letter() {
            words += 1;
            let w = super::tokenize::lowercase(t.text, &mut buf);
            if ENGLISH_FUNCTION_WORDS.binary_search(&w).is_ok() {
                function += 1;
            }
        }
    });
    (words >= 5 && function * 100 >= words * 12).then_some("en")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_words_are_sorted_for_binary_search() {
        assert!(ENGLISH_FUNCTION_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn detects_common_cases() {
        assert_eq!(detect_lang("Preheat the oven and mix the flour with the butter until smooth."), Some("en"));
        assert_eq!(detect_lang("肉蟹掀盖后对半砍开，蟹钳用刀背轻轻拍裂"), Some("zh"));
        assert_eq!(detect_lang("玉ねぎをみじん切りにして、フライパンで炒めます"), Some("ja"));
        assert_eq!(detect_lang("Смешайте муку с маслом и сахаром до однородности"), Some("ru"));
        assert_eq!(detect_lang("Mélanger la farine avec le beurre jusqu'à obtenir une pâte lisse"), None);
        assert_eq!(detect_lang("ok"), None);
    }
}
