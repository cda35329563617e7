//! Step-text truncation (the sequencing paper keeps at most 5 sentences and 60 tokens per step).
//!
//! Truncation keeps a prefix of the original text (no re-tokenised output), so what a model reads is what the
//! author wrote. Sentences end after `.`, `!`, `?`, `;` followed by whitespace or the end, after the CJK marks
//! `。！？；` (no space needed), or at a line break. Tokens are runs of non-space characters, except that every
//! CJK character (ideograph, kana, full-width punctuation) is a token of its own — Chinese steps have no spaces.

/// The text cut to at most `max_sentences` sentences and then at most `max_tokens` tokens, trimmed.
pub fn truncate_step_text(text: &str, max_sentences: Option<usize>, max_tokens: Option<usize>) -> String {
    let mut t = text.trim();
    if let Some(k) = max_sentences {
        t = &t[..sentence_prefix_end(t, k)];
    }
    if let Some(k) = max_tokens {
        t = &t[..token_prefix_end(t, k)];
    }
    t.trim_end().to_string()
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x2E80..=0x2FDF | 0x3000..=0x303F | 0x3040..=0x30FF | 0x3100..=0x31FF | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xFF00..=0xFFEF | 0x20000..=0x2FA1F)
}

/// Byte offset where the first `k` sentences end (the whole text when it has at most `k`).
fn sentence_prefix_end(t: &str, k: usize) -> usize {
    if k == 0 {
        return 0;
    }
    let chars: Vec<(usize, char)> = t.char_indices().collect();
    let mut done = 0;
    let mut last_end = 0;
    let mut i = 0;
    while i < chars.len() {
        let (off, c) = chars[i];
        let end = if c == '\n' {
            Some(off)
        } else if matches!(c, '。' | '！' | '？' | '；') {
            // Swallow a run of closing marks ("？！").
            while i + 1 < chars.len() && matches!(chars[i + 1].1, '。' | '！' | '？' | '；' | '”' | '」') {
                i += 1;
            }
            Some(chars[i].0 + chars[i].1.len_utf8())
        } else if matches!(c, '.' | '!' | '?' | ';') {
            let start = i;
            while i + 1 < chars.len() && matches!(chars[i + 1].1, '.' | '!' | '?' | ';' | '"' | '\'' | ')') {
                i += 1;
            }
            let dots = chars[start..=i].iter().filter(|&&(_, c)| c == '.').count();
            let followed_by_space = chars.get(i + 1).is_none_or(|&(_, n)| n.is_whitespace());
            // An ellipsis ("...") does not end a sentence; a decimal point is not followed by a space.
            (followed_by_space && dots < 2).then(|| chars[i].0 + chars[i].1.len_utf8())
        } else {
            None
        };
        // Only a non-blank stretch since the previous end is a sentence (no empty sentences from line breaks).
        if let Some(end) = end
            && !t[last_end..end].trim().is_empty()
        {
            done += 1;
            last_end = end;
            if done == k {
                return end;
            }
        }
        i += 1;
    }
    t.len()
}

/// Byte offset where the first `k` tokens end.
fn token_prefix_end(t: &str, k: usize) -> usize {
    if k == 0 {
        return 0;
    }
    let mut count = 0;
    let mut in_word = false;
    for (off, c) in t.char_indices() {
        if c.is_whitespace() {
            if in_word {
                in_word = false;
                if count == k {
                    return off;
                }
            }
        } else if is_cjk(c) {
            if in_word {
                in_word = false;
                if count == k {
                    return off;
                }
            }
            count += 1;
            if count == k {
                // The CJK token ends right after this character unless a word is glued to it, which is a new token.
                return off + c.len_utf8();
            }
        } else if !in_word {
            in_word = true;
            count += 1;
            if count > k {
                return off;
            }
        }
    }
    t.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_sentences() {
        let t = "Mix the flour. Add eggs! Is it smooth? Bake it. Serve warm. Enjoy it.";
        assert_eq!(truncate_step_text(t, Some(2), None), "Mix the flour. Add eggs!");
        assert_eq!(truncate_step_text(t, Some(5), None), "Mix the flour. Add eggs! Is it smooth? Bake it. Serve warm.");
        assert_eq!(truncate_step_text(t, Some(10), None), t);
        // Decimal points and ellipses do not end sentences.
        assert_eq!(truncate_step_text("Use 2.5 cups... then stir. Done.", Some(1), None), "Use 2.5 cups... then stir.");
    }

    #[test]
    fn line_breaks_end_sentences_once() {
        let t = "Chop onions.\nFry them\n\nServe.";
        assert_eq!(truncate_step_text(t, Some(2), None), "Chop onions.\nFry them");
        assert_eq!(truncate_step_text(t, Some(3), None), t);
    }

    #[test]
    fn chinese_sentences_and_tokens() {
        let t = "把土豆切片。放入锅中煮十分钟！出锅";
        assert_eq!(truncate_step_text(t, Some(1), None), "把土豆切片。");
        assert_eq!(truncate_step_text(t, None, Some(3)), "把土豆");
        assert_eq!(truncate_step_text("加 2 勺盐", None, Some(3)), "加 2 勺");
    }

    #[test]
    fn keeps_the_first_tokens() {
        let t = "one two  three\tfour five";
        assert_eq!(truncate_step_text(t, None, Some(3)), "one two  three");
        assert_eq!(truncate_step_text(t, None, Some(60)), t);
        assert_eq!(truncate_step_text(t, Some(5), Some(1)), "one");
    }
}
