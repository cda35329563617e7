//! Character-level normalisation: Unicode NFKC, optional ASCII folding, whitespace collapsing, and the missing
//! space after a sentence end ("mix.Next" → "mix. Next"). Each function returns `None` when the text is unchanged,
//! so callers can count changes and skip copies.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// Unicode NFKC (compatibility composition): full-width forms, ligatures, `½` → `1⁄2`, `℃` → `°C`...
pub fn nfkc(text: &str) -> Option<String> {
    if text.is_ascii() || is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        return None;
    }
    let s: String = text.nfkc().collect();
    (s != text).then_some(s)
}

/// Typographic punctuation and symbols with an ASCII spelling.
fn ascii_punct(c: char) -> Option<&'static str> {
    Some(match c {
        '‘' | '’' | '‚' | '‛' | '′' | '`' | '´' => "'",
        '“' | '”' | '„' | '‟' | '″' | '«' | '»' => "\"",
        '‐' | '‑' | '‒' | '–' | '—' | '―' | '−' => "-",
        '…' => "...",
        '•' | '·' => "*",
        '×' => "x",
        '⁄' | '∕' => "/",
        '\u{a0}' | '\u{2002}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => " ",
        'ß' => "ss",
        'æ' => "ae",
        'Æ' => "AE",
        'œ' => "oe",
        'Œ' => "OE",
        'ø' => "o",
        'Ø' => "O",
        'ł' => "l",
        'Ł' => "L",
        'đ' => "d",
        'Đ' => "D",
        _ => return None,
    })
}

/// ASCII folding: accents dropped (NFKD, then combining marks removed) and typographic punctuation replaced.
/// Characters without an ASCII form (CJK, Cyrillic, symbols such as `°`) are kept.
pub fn ascii_fold(text: &str) -> Option<String> {
    if text.is_ascii() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else if let Some(a) = ascii_punct(c) {
            out.push_str(a);
        } else {
            let mut decomposed = std::iter::once(c).nfkd().filter(|d| !is_combining_mark(*d)).peekable();
            if decomposed.peek().is_some_and(char::is_ascii) {
                out.extend(decomposed);
            } else {
                out.push(c);
            }
        }
    }
    (out != text).then_some(out)
}

/// Invisible characters that only get in the way of tokenization (zero-width spaces, soft hyphens, BOMs).
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{200b}' | '\u{ad}' | '\u{feff}' | '\u{2060}') || (c.is_control() && c != '\n' && c != '\t')
}

/// Collapse whitespace: runs of spaces and tabs become one space, lines are trimmed, blank lines removed, invisible
/// characters dropped. With `keep_newlines` false the text becomes a single line.
pub fn collapse_whitespace(text: &str, keep_newlines: bool) -> Option<String> {
    let needs = text.bytes().any(|b| matches!(b, b'\t' | b'\r' | 0x0b | 0x0c) || !(0x09..0x80).contains(&b))
        || text.contains("  ")
        || text.contains(" \n")
        || text.contains("\n ")
        || text.contains("\n\n")
        || text.starts_with(char::is_whitespace)
        || text.ends_with(char::is_whitespace)
        || (!keep_newlines && text.contains('\n'));
    if !needs {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    let mut pending_newline = false;
    for c in text.chars() {
        if c == '\n' || c == '\r' || c == '\u{2028}' || c == '\u{2029}' {
            if keep_newlines {
                pending_newline = true;
            } else {
                pending_space = true;
            }
        } else if c.is_whitespace() {
            pending_space = true;
        } else if is_invisible(c) {
            continue;
        } else {
            if !out.is_empty() {
                if pending_newline {
                    out.push('\n');
                } else if pending_space {
                    out.push(' ');
                }
            }
            pending_space = false;
            pending_newline = false;
            out.push(c);
        }
    }
    (out != text).then_some(out)
}

/// Insert the space missing after a sentence end between two words: "mix.Next" → "mix. Next",
/// "done!Then" → "done! Then". Needs a lowercase letter before (two letters at least, so "e.g.The" and "U.S.A"
/// stay) and an uppercase letter followed by a lowercase one after (so "file.JPG" and "v1.2" stay).
pub fn fix_sentence_spacing(text: &str) -> Option<(String, usize)> {
    let b = text.as_bytes();
    let mut fixes = Vec::new();
    // A stop with letters on both sides lies inside a whitespace-free word: each word is checked for a URL,
    // address or path once (checked per stop, a long word full of stops cost quadratic time).
    let mut start = 0;
    for (end, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        if !c.is_whitespace() {
            continue;
        }
        let mut in_word = Vec::new();
        for i in start.max(2)..end.min(b.len().saturating_sub(2)) {
            if matches!(b[i], b'.' | b'!' | b'?' | b';' | b':' | b',')
                && b[i - 1].is_ascii_lowercase()
                && b[i - 2].is_ascii_lowercase()
                && b[i + 1].is_ascii_uppercase()
                && b[i + 2].is_ascii_lowercase()
            {
                in_word.push(i + 1);
            }
        }
        if !in_word.is_empty() && !looks_like_url_or_file(&text[start..end]) {
            fixes.extend(in_word);
        }
        // The next word starts after the whole whitespace character, which may be wider than one byte (U+2000...).
        start = end + c.len_utf8();
    }
    if fixes.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + fixes.len());
    let mut last = 0;
    for &f in &fixes {
        out.push_str(&text[last..f]);
        out.push(' ');
        last = f;
    }
    out.push_str(&text[last..]);
    Some((out, fixes.len()))
}

/// True when a whitespace-free word is a URL, e-mail address or path (a `/` or `@` in it).
fn looks_like_url_or_file(word: &str) -> bool {
    word.contains("://") || word.contains('@') || word.contains('/') || word.starts_with("www.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfkc_folds_compatibility_forms() {
        assert_eq!(nfkc("ﬁne ＡＢＣ ℃").as_deref(), Some("fine ABC °C"));
        assert_eq!(nfkc("plain"), None);
        assert_eq!(nfkc("café"), None);
    }

    #[test]
    fn ascii_fold_drops_accents_keeps_cjk() {
        assert_eq!(ascii_fold("Crème brûlée – “hot”…").as_deref(), Some("Creme brulee - \"hot\"..."));
        assert_eq!(ascii_fold("生粉 350°F").as_deref(), None);
        assert_eq!(ascii_fold("Straße").as_deref(), Some("Strasse"));
    }

    #[test]
    fn whitespace() {
        assert_eq!(collapse_whitespace("  a \t b\r\n\n  c  ", true).as_deref(), Some("a b\nc"));
        assert_eq!(collapse_whitespace("a\nb", false).as_deref(), Some("a b"));
        assert_eq!(collapse_whitespace("a\u{200b}b\u{a0}c", true).as_deref(), Some("ab c"));
        assert_eq!(collapse_whitespace("a b\nc", true), None);
    }

    #[test]
    fn sentence_spacing() {
        assert_eq!(fix_sentence_spacing("Jiffy mix.Next, add").map(|x| x.0).as_deref(), Some("Jiffy mix. Next, add"));
        for s in ["e.g.The", "U.S.A", "image.JPG", "see www.instructables.Com", "http://a.b/c.Html", "v1.2"] {
            assert_eq!(fix_sentence_spacing(s), None, "{s}");
        }
        // The word around the stop starts after a whitespace character of three bytes (found by the property test).
        assert_eq!(fix_sentence_spacing("\u{2000}aa!Aa").map(|x| x.0).as_deref(), Some("\u{2000}aa! Aa"));
        assert_eq!(fix_sentence_spacing("\u{3000}x/aa.Bb"), None, "a path after an ideographic space");
        // Each word decides for its own stops ("ef.Html" and "cd.Com" would be fixed outside a URL or address).
        assert_eq!(
            fix_sentence_spacing("see http://ab.cd/ef.Html then mix.Next, and ab@cd.Com\u{2003}done.Then")
                .map(|x| x.0)
                .as_deref(),
            Some("see http://ab.cd/ef.Html then mix. Next, and ab@cd.Com\u{2003}done. Then")
        );
        // One long word full of stops: every stop fixed (each word is checked once, not once per stop).
        let long = "aa.Bb".repeat(20_000);
        let (fixed, n) = fix_sentence_spacing(&long).expect("stops to fix");
        assert_eq!(n, 20_000);
        assert_eq!(fixed.len(), long.len() + n);
        assert_eq!(fix_sentence_spacing(&format!("/{long}")), None, "a path");
    }
}
