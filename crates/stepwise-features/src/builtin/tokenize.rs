//! The word tokenizer of the built-in text encoders.
//!
//! Lowercased tokens: maximal runs of letters, digits and `_` (what Python's `\w+` matches in the common case),
//! except that each CJK ideograph / kana is a token of its own, since Chinese and Japanese do not separate words
//! with spaces (a character-level vocabulary is the usual word2vec baseline there).

/// A one-line description for encoders' `preprocessing` strings.
pub const DESCRIPTION: &str = "lowercase; tokens = runs of letters/digits/_, each CJK character a token";

/// Tokens of `text`, in order.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        if is_cjk(ch) {
            flush(&mut cur, &mut out);
            out.push(ch.to_string());
        } else if ch.is_alphanumeric() || ch == '_' {
            cur.extend(ch.to_lowercase());
        } else {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

fn flush(cur: &mut String, out: &mut Vec<String>) {
    if !cur.is_empty() {
        out.push(std::mem::take(cur));
    }
}

/// CJK ideographs (incl. extensions and compatibility forms), hiragana and katakana.
pub fn is_cjk(ch: char) -> bool {
    matches!(ch as u32,
        0x3040..=0x30FF        // hiragana, katakana
        | 0x3400..=0x4DBF      // extension A
        | 0x4E00..=0x9FFF      // unified ideographs
        | 0xF900..=0xFAFF      // compatibility ideographs
        | 0x20000..=0x3134F) // extensions B–G
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_words_lowercased_punctuation_dropped() {
        assert_eq!(
            tokenize("Heat the oven to 200C. Don't burn_it!"),
            ["heat", "the", "oven", "to", "200c", "don", "t", "burn_it"]
        );
    }

    #[test]
    fn cjk_characters_are_tokens() {
        assert_eq!(tokenize("将鸡蛋打入碗中, mix 2次"), ["将", "鸡", "蛋", "打", "入", "碗", "中", "mix", "2", "次"]);
        assert!(tokenize("  \n\t.,;").is_empty());
    }

    #[test]
    fn accented_letters_stay_in_words() {
        assert_eq!(tokenize("Crème Brûlée"), ["crème", "brûlée"]);
    }
}
