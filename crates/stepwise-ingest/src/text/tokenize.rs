//! The one tokenizer behind statistics, vocabulary rates and the cleaner's token rules.
//!
//! - A *word* token is a maximal run of letters, digits and combining marks. Digits joined by `.`, `,` or `/`
//!   stay one token (`1.5`, `1,000`, `1/2`); apostrophes, hyphens and all other punctuation separate tokens and
//!   are not tokens themselves (`don't` → `don`, `t`; `non-stick` → `non`, `stick`).
//! - Each CJK ideograph, hiragana or katakana character is one token: Chinese and Japanese text has no spaces, and
//!   a character count is what the literature reports for it (word segmentation would need a dictionary model).
//!   Hangul is written with spaces, so it tokenizes like Latin text.
//!
//! Sentences: a sentence ends at `.`, `!`, `?` or `…` followed by whitespace or the end of the text, at `。！？`,
//! or at a line break; a few abbreviations (`e.g.`, `i.e.`, `vs.`, `approx.`...) and single letters (`U.S.`) do
//! not end sentences. A sentence counts only if it holds a token.

use unicode_normalization::char::is_combining_mark;

/// A token: its text and byte offset in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    pub text: &'a str,
    pub start: usize,
}

impl<'a> Token<'a> {
    pub fn end(&self) -> usize {
        self.start + self.text.len()
    }

    /// True when the token has a letter (not only digits and joiners).
    pub fn has_letter(&self) -> bool {
        self.text.chars().any(char::is_alphabetic)
    }

    /// True for a CJK one-character token.
    pub fn is_cjk(&self) -> bool {
        let mut cs = self.text.chars();
        matches!((cs.next(), cs.next()), (Some(c), None) if is_cjk(c))
    }
}

/// Ideographs, hiragana and katakana: one token per character.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xF900..=0xFAFF    // compatibility ideographs
        | 0x20000..=0x3134F) // extensions B–G
}

/// A character that belongs inside a word token.
#[inline]
pub fn is_word_char(c: char) -> bool {
    if c.is_ascii() { c.is_ascii_alphanumeric() } else { (c.is_alphanumeric() || is_combining_mark(c)) && !is_cjk(c) }
}

/// Call `f` with every token of `text`, in order.
pub fn for_each_token<'a>(text: &'a str, mut f: impl FnMut(Token<'a>)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if b.is_ascii_alphanumeric() {
                let end = word_end(text, i);
                f(Token { text: &text[i..end], start: i });
                i = end;
            } else {
                i += 1;
            }
            continue;
        }
        let c = text[i..].chars().next().expect("index is on a char boundary");
        if is_cjk(c) {
            let end = i + c.len_utf8();
            f(Token { text: &text[i..end], start: i });
            i = end;
        } else if is_word_char(c) {
            let end = word_end(text, i);
            f(Token { text: &text[i..end], start: i });
            i = end;
        } else {
            i += c.len_utf8();
        }
    }
}

/// The end of the word token starting at `start` (which is a word character).
fn word_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = start;
    let mut prev_digit = false;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if b.is_ascii_alphanumeric() {
                prev_digit = b.is_ascii_digit();
                i += 1;
                continue;
            }
            // `1.5`, `1,000`, `1/2`: a joiner between two digits stays inside the token.
            if prev_digit && matches!(b, b'.' | b',' | b'/') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
                i += 1;
                continue;
            }
            return i;
        }
        let c = text[i..].chars().next().expect("index is on a char boundary");
        if is_word_char(c) {
            prev_digit = c.is_numeric();
            i += c.len_utf8();
        } else {
            return i;
        }
    }
    i
}

/// All tokens of `text`.
pub fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut v = Vec::new();
    for_each_token(text, |t| v.push(t));
    v
}

/// The number of tokens of `text`.
pub fn count_tokens(text: &str) -> usize {
    let mut n = 0;
    for_each_token(text, |_| n += 1);
    n
}

/// Lowercase `token` into `buf` (reused across calls) and return it; no allocation for ASCII lowercase tokens.
pub fn lowercase<'b>(token: &'b str, buf: &'b mut String) -> &'b str {
    if token.bytes().all(|b| !b.is_ascii_uppercase() && b < 0x80) {
        return token;
    }
    buf.clear();
    if token.is_ascii() {
        buf.push_str(token);
        buf.make_ascii_lowercase();
    } else {
        for c in token.chars() {
            buf.extend(c.to_lowercase());
        }
    }
    buf
}

const ABBREVIATIONS: &[&str] = &["approx", "cf", "dr", "fig", "mr", "mrs", "vs"];

/// The number of sentences of `text` (see the module docs for the rules).
pub fn count_sentences(text: &str) -> usize {
    let mut count = 0;
    for_each_sentence_end(text, |_| {
        count += 1;
        true
    });
    count
}

/// `text` up to the end of its `n`-th sentence (all of it when it has `n` or fewer), e.g. the sequencing
/// paper's "first 5 sentences of a step".
pub fn first_sentences(text: &str, n: usize) -> &str {
    let mut seen = 0;
    let mut end = text.len();
    if n == 0 {
        return "";
    }
    for_each_sentence_end(text, |at| {
        seen += 1;
        if seen == n {
            end = at;
            return false;
        }
        true
    });
    &text[..end]
}

/// Call `f` with the byte offset just past the end of each sentence, in order, until it returns false. The last
/// sentence may end at `text.len()` without a boundary character.
fn for_each_sentence_end(text: &str, mut f: impl FnMut(usize) -> bool) {
    let bytes = text.as_bytes();
    let mut has_token = false;
    let mut word_start = 0usize; // start of the current run of non-space characters
    let mut i = 0;
    while i < bytes.len() {
        // ASCII fast path; other characters are decoded.
        let (c, len) = if bytes[i] < 0x80 {
            (bytes[i] as char, 1)
        } else {
            let c = text[i..].chars().next().expect("index is on a char boundary");
            (c, c.len_utf8())
        };
        let next = i + len;
        if c.is_whitespace() {
            word_start = next;
        }
        if is_word_char(c) || is_cjk(c) {
            has_token = true;
        }
        let boundary = match c {
            '\n' | '。' | '！' | '？' => true,
            '.' | '!' | '?' | '…' => {
                let followed_by_space = text[next..].chars().next().is_none_or(char::is_whitespace);
                followed_by_space && !(c == '.' && is_abbreviation(&text[word_start.min(i)..i]))
            }
            _ => false,
        };
        if boundary && has_token {
            has_token = false;
            if !f(next) {
                return;
            }
        }
        i = next;
    }
    if has_token {
        f(text.len());
    }
}

fn is_abbreviation(word: &str) -> bool {
    let w = word.trim_start_matches(|c: char| !c.is_alphanumeric());
    // Initials and dotted abbreviations: `J.`, `U.S.`, `a.m.`.
    if !w.is_empty() && w.split('.').all(|part| part.chars().count() == 1 && part.chars().all(char::is_alphabetic)) {
        return true;
    }
    ABBREVIATIONS.iter().any(|a| a.eq_ignore_ascii_case(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<&str> {
        tokens(s).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn first_sentences_cuts_after_the_nth_sentence() {
        let t = "Preheat the oven to 350°F. Mix e.g. flour and sugar! Bake.\nServe warm";
        assert_eq!(first_sentences(t, 1), "Preheat the oven to 350°F.");
        assert_eq!(first_sentences(t, 2), "Preheat the oven to 350°F. Mix e.g. flour and sugar!");
        assert_eq!(first_sentences(t, 4), t);
        assert_eq!(first_sentences(t, 9), t);
        assert_eq!(first_sentences(t, 0), "");
        assert_eq!(count_sentences(t), 4);
        assert_eq!(first_sentences("炒菜。加盐。", 1), "炒菜。");
    }

    #[test]
    fn words_numbers_and_punctuation() {
        assert_eq!(
            texts("Add 1.5 cups (1/2 lb) of non-stick flour, don't stir!"),
            ["Add", "1.5", "cups", "1/2", "lb", "of", "non", "stick", "flour", "don", "t", "stir"]
        );
        assert_eq!(texts("1,000g at 350°F."), ["1,000g", "at", "350", "F"]);
        assert_eq!(texts("end. 2."), ["end", "2"]);
    }

    #[test]
    fn cjk_characters_are_tokens() {
        assert_eq!(texts("撒 5g 生粉"), ["撒", "5g", "生", "粉"]);
        assert_eq!(texts("café crème"), ["café", "crème"]);
        assert_eq!(texts("안녕 하세요"), ["안녕", "하세요"]);
    }

    #[test]
    fn offsets_point_into_the_text() {
        let s = "é-x 12";
        for t in tokens(s) {
            assert_eq!(&s[t.start..t.end()], t.text);
        }
    }

    #[test]
    fn sentences() {
        assert_eq!(count_sentences("Mix it. Then bake! Done"), 3);
        assert_eq!(count_sentences("Use e.g. flour. Made in the U.S. today."), 2);
        assert_eq!(count_sentences("line one\nline two\n\n"), 2);
        assert_eq!(count_sentences("切好。炒熟。"), 2);
        assert_eq!(count_sentences("... !"), 0);
        assert_eq!(count_sentences("Heat to 1.5 degrees"), 1);
    }

    #[test]
    fn lowercase_reuses_ascii() {
        let mut buf = String::new();
        assert_eq!(lowercase("abc", &mut buf), "abc");
        assert_eq!(lowercase("AbC", &mut buf), "abc");
        assert_eq!(lowercase("ÉCLAIR", &mut buf), "éclair");
    }
}
