//! Stripping markup from scraped text: HTML tags (and the content of `<script>`/`<style>`, which is code or CSS,
//! not text), HTML comments, character entities, Markdown inline markup and BBCode tags.
//!
//! Conservative by design: `<` only opens a tag when a letter, `/` or `!` follows and a `>` closes it on the same
//! stretch of text, so "x < 5 and y > 3" is left alone; single `*`/`_` emphasis needs a matching closer on the
//! same line with non-space text inside, so "2 * 3" and snake_case words survive.

/// What [`strip_markup`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkupCounts {
    pub html_tags: usize,
    /// `<script>`/`<style>` blocks and HTML comments, content included.
    pub html_blocks: usize,
    pub entities: usize,
    pub markdown: usize,
    pub bbcode: usize,
}

impl MarkupCounts {
    pub fn total(&self) -> usize {
        self.html_tags + self.html_blocks + self.entities + self.markdown + self.bbcode
    }
}

/// Strip markup from `text`; `None` when there is nothing to strip (the common case, checked quickly).
pub fn strip_markup(text: &str, counts: &mut MarkupCounts) -> Option<String> {
    if !text.bytes().any(|b| matches!(b, b'<' | b'&' | b'*' | b'_' | b'`' | b'[' | b'#' | b'~' | b'!')) {
        return None;
    }
    let before = *counts;
    let s = strip_html(text, counts);
    let s = decode_entities(&s, counts);
    let s = strip_markdown(&s, counts);
    let s = strip_bbcode(&s, counts);
    (counts.total() != before.total() && s != text).then_some(s)
}

/// Tags whose removal must not glue the words on either side together.
const BLOCK_TAGS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "img",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
];

fn strip_html(text: &str, counts: &mut MarkupCounts) -> String {
    if !text.contains('<') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        let tail = &rest[lt..];
        if let Some(after) = tail.strip_prefix("<!--") {
            counts.html_blocks += 1;
            rest = after.find("-->").map_or("", |e| &after[e + 3..]);
            continue;
        }
        match parse_tag(tail) {
            Some((name, len, closing)) => {
                let lname = name.to_ascii_lowercase();
                if !closing && (lname == "script" || lname == "style") {
                    counts.html_blocks += 1;
                    let body = &tail[len..];
                    rest = find_ascii_ci(body, &format!("</{lname}"))
                        .map(|e| body[e..].find('>').map_or("", |g| &body[e + g + 1..]))
                        .unwrap_or("");
                    continue;
                }
                counts.html_tags += 1;
                if BLOCK_TAGS.contains(&lname.as_str()) {
                    out.push('\n');
                }
                rest = &tail[len..];
            }
            None => {
                out.push('<');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// If `s` starts with an HTML tag, its name, byte length and whether it is a closing tag.
fn parse_tag(s: &str) -> Option<(&str, usize, bool)> {
    let b = s.as_bytes();
    let (closing, name_start) = match b.get(1) {
        Some(b'/') => (true, 2),
        Some(b'!') => (false, 2), // <!DOCTYPE ...>
        Some(c) if c.is_ascii_alphabetic() => (false, 1),
        _ => return None,
    };
    let name_len = b[name_start..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'-').count();
    if name_len == 0 {
        return None;
    }
    let after_name = b.get(name_start + name_len)?;
    if !(after_name.is_ascii_whitespace() || *after_name == b'>' || *after_name == b'/') {
        return None;
    }
    // The tag ends at the first `>` outside quotes, within a bounded stretch without another `<`.
    let mut quote: Option<u8> = None;
    for (i, &c) in b.iter().enumerate().skip(name_start + name_len).take(4096) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(c),
            (None, b'>') => return Some((&s[name_start..name_start + name_len], i + 1, closing)),
            (None, b'<') => return None,
            _ => {}
        }
    }
    None
}

fn find_ascii_ci(hay: &str, needle: &str) -> Option<usize> {
    let n = needle.len();
    hay.as_bytes().windows(n).position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// Named entities of HTML that occur in scraped recipes and manuals (the rest are left as written).
const ENTITIES: &[(&str, &str)] = &[
    ("amp", "&"),
    ("lt", "<"),
    ("gt", ">"),
    ("quot", "\""),
    ("apos", "'"),
    ("nbsp", "\u{a0}"),
    ("ndash", "–"),
    ("mdash", "—"),
    ("hellip", "…"),
    ("lsquo", "‘"),
    ("rsquo", "’"),
    ("ldquo", "“"),
    ("rdquo", "”"),
    ("sbquo", "‚"),
    ("bdquo", "„"),
    ("laquo", "«"),
    ("raquo", "»"),
    ("deg", "°"),
    ("frac12", "½"),
    ("frac14", "¼"),
    ("frac34", "¾"),
    ("frac13", "⅓"),
    ("frac23", "⅔"),
    ("frac18", "⅛"),
    ("times", "×"),
    ("divide", "÷"),
    ("plusmn", "±"),
    ("micro", "µ"),
    ("middot", "·"),
    ("bull", "•"),
    ("copy", "©"),
    ("reg", "®"),
    ("trade", "™"),
    ("sect", "§"),
    ("para", "¶"),
    ("prime", "′"),
    ("Prime", "″"),
    ("cent", "¢"),
    ("pound", "£"),
    ("euro", "€"),
    ("yen", "¥"),
    ("iexcl", "¡"),
    ("iquest", "¿"),
    ("shy", "\u{ad}"),
    ("ensp", "\u{2002}"),
    ("emsp", "\u{2003}"),
    ("thinsp", "\u{2009}"),
    ("zwj", "\u{200d}"),
    ("zwnj", "\u{200c}"),
    ("agrave", "à"),
    ("aacute", "á"),
    ("acirc", "â"),
    ("atilde", "ã"),
    ("auml", "ä"),
    ("aring", "å"),
    ("aelig", "æ"),
    ("ccedil", "ç"),
    ("egrave", "è"),
    ("eacute", "é"),
    ("ecirc", "ê"),
    ("euml", "ë"),
    ("igrave", "ì"),
    ("iacute", "í"),
    ("icirc", "î"),
    ("iuml", "ï"),
    ("ntilde", "ñ"),
    ("ograve", "ò"),
    ("oacute", "ó"),
    ("ocirc", "ô"),
    ("otilde", "õ"),
    ("ouml", "ö"),
    ("oslash", "ø"),
    ("ugrave", "ù"),
    ("uacute", "ú"),
    ("ucirc", "û"),
    ("uuml", "ü"),
    ("szlig", "ß"),
    ("Agrave", "À"),
    ("Aacute", "Á"),
    ("Auml", "Ä"),
    ("Ccedil", "Ç"),
    ("Eacute", "É"),
    ("Egrave", "È"),
    ("Ntilde", "Ñ"),
    ("Ouml", "Ö"),
    ("Uuml", "Ü"),
    ("oelig", "œ"),
    ("OElig", "Œ"),
];

fn decode_entities(text: &str, counts: &mut MarkupCounts) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let tail = &rest[amp + 1..];
        let semi = tail.as_bytes().iter().take(33).position(|&b| b == b';');
        let decoded = semi.and_then(|end| {
            let name = &tail[..end];
            let c = if let Some(num) = name.strip_prefix('#') {
                let code = match num.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => num.parse::<u32>().ok(),
                };
                // Control characters and surrogates are not text; leave such references as written.
                code.and_then(char::from_u32)
                    .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
                    .map(|c| c.to_string())
            } else {
                ENTITIES.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
            };
            c.map(|c| (c, end))
        });
        match decoded {
            Some((s, end)) => {
                counts.entities += 1;
                out.push_str(&s);
                rest = &tail[end + 1..];
            }
            None => {
                out.push('&');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

fn strip_markdown(text: &str, counts: &mut MarkupCounts) -> String {
    if !text.bytes().any(|b| matches!(b, b'*' | b'_' | b'`' | b'[' | b'#' | b'~' | b'!')) {
        return text.to_string();
    }
    let mut lines_out = Vec::new();
    for line in text.split('\n') {
        let line = strip_heading(line, counts);
        let line = strip_links(line, counts);
        let mut line = line;
        for marker in ["**", "__", "~~", "`", "*", "_"] {
            line = strip_emphasis(&line, marker, counts);
        }
        lines_out.push(line);
    }
    lines_out.join("\n")
}

fn strip_heading<'a>(line: &'a str, counts: &mut MarkupCounts) -> &'a str {
    let trimmed = line.trim_start();
    let hashes = trimmed.bytes().take_while(|&b| b == b'#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
        counts.markdown += 1;
        return trimmed[hashes..].trim_start();
    }
    line
}

/// `[text](url)` → `text`; `![alt](url)` → nothing (an image reference is not step text).
fn strip_links(line: &str, counts: &mut MarkupCounts) -> String {
    if !line.contains("](") {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let tail = &rest[open + 1..];
        let parsed = tail.find(']').and_then(|close| {
            let after = &tail[close + 1..];
            let inner = after.strip_prefix('(')?;
            let end = inner.find(')')?;
            (!inner[..end].contains(char::is_whitespace) || inner[..end].contains('"'))
                .then_some((close, 1 + close + 1 + end + 1))
        });
        match parsed {
            Some((close, len)) => {
                counts.markdown += 1;
                let before = &rest[..open];
                if let Some(b) = before.strip_suffix('!') {
                    out.push_str(b);
                } else {
                    out.push_str(before);
                    out.push_str(&tail[..close]);
                }
                rest = &tail[len..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Remove paired emphasis markers: the opener is not preceded by a word character and is followed by
/// non-space; the closer is preceded by non-space and not followed by a word character.
fn strip_emphasis(line: &str, marker: &str, counts: &mut MarkupCounts) -> String {
    if !line.contains(marker) {
        return line.to_string();
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find(marker) {
        let before = rest[..open].chars().next_back();
        let inner_start = open + marker.len();
        let after_open = rest[inner_start..].chars().next();
        let single = marker.len() == 1;
        let opener_ok = !word(before)
            && after_open.is_some_and(|c| !c.is_whitespace())
            && !(single && after_open.is_some_and(|c| c.to_string() == marker));
        let closer = opener_ok
            .then(|| {
                let inner = &rest[inner_start..];
                let mut from = 0;
                while let Some(pos) = inner[from..].find(marker) {
                    let p = from + pos;
                    let prev = inner[..p].chars().next_back();
                    let next = inner[p + marker.len()..].chars().next();
                    if p > 0 && prev.is_some_and(|c| !c.is_whitespace()) && !word(next) {
                        return Some(p);
                    }
                    from = p + marker.len();
                }
                None
            })
            .flatten();
        match closer {
            Some(p) => {
                counts.markdown += 1;
                out.push_str(&rest[..open]);
                out.push_str(&rest[inner_start..inner_start + p]);
                rest = &rest[inner_start + p + marker.len()..];
            }
            None => {
                out.push_str(&rest[..inner_start]);
                rest = &rest[inner_start..];
            }
        }
    }
    out.push_str(rest);
    out
}

const BBCODE_TAGS: &[&str] = &["b", "i", "u", "s", "url", "quote", "color", "size", "font", "center", "code", "list"];

/// `[b]x[/b]`, `[url=...]x[/url]` → `x`; `[img]...[/img]` → nothing.
fn strip_bbcode(text: &str, counts: &mut MarkupCounts) -> String {
    if !text.contains("[/") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        let close = tail.find(']').filter(|&c| c <= 64);
        let tag = close.map(|c| &tail[1..c]);
        let name = tag.map(|t| t.trim_start_matches('/').split('=').next().unwrap_or("").to_ascii_lowercase());
        match (close, name) {
            (Some(c), Some(n)) if n == "img" && !tag.unwrap_or("").starts_with('/') => {
                counts.bbcode += 1;
                let body = &tail[c + 1..];
                rest = find_ascii_ci(body, "[/img]").map_or(body, |e| &body[e + 6..]);
            }
            (Some(c), Some(n)) if BBCODE_TAGS.contains(&n.as_str()) => {
                counts.bbcode += 1;
                rest = &tail[c + 1..];
            }
            _ => {
                out.push('[');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(s: &str) -> String {
        let mut c = MarkupCounts::default();
        strip_markup(s, &mut c).unwrap_or_else(|| s.to_string())
    }

    #[test]
    fn html_tags_entities_and_blocks() {
        assert_eq!(strip("<p>Mix <b>well</b>&nbsp;&amp; bake.</p>"), "\nMix well\u{a0}& bake.\n");
        assert_eq!(strip("a<br/>b"), "a\nb");
        assert_eq!(strip("<style>.x { color: red; }</style>Stir<script>alert(1)</script>."), "Stir.");
        assert_eq!(strip("keep <!-- hidden --> this"), "keep  this");
        assert_eq!(strip("<span style=\"a>b\">x</span>"), "x");
        assert_eq!(strip("&#189; cup &#x2014; &frac12;"), "½ cup — ½");
    }

    #[test]
    fn leaves_comparisons_and_unknown_entities() {
        for s in ["x < 5 and y > 3", "AT&T and &bogus; stay", "2 * 3 * 4", "snake_case_name", "a <3 b", "&#0;"] {
            let mut c = MarkupCounts::default();
            assert_eq!(strip_markup(s, &mut c), None, "{s}");
        }
    }

    #[test]
    fn markdown_and_bbcode() {
        assert_eq!(strip("**Bold** and *em* and `code`"), "Bold and em and code");
        assert_eq!(strip("See [the guide](https://x.y/z) now"), "See the guide now");
        assert_eq!(strip("![photo](a.jpg)Then stir"), "Then stir");
        assert_eq!(strip("## Step two"), "Step two");
        assert_eq!(strip("[b]Hot[/b] [url=http://a]link[/url] [img]x.png[/img]done"), "Hot link done");
    }

    #[test]
    fn counts_what_it_removed() {
        let mut c = MarkupCounts::default();
        strip_markup("<i>a</i> &amp; **b**", &mut c);
        assert_eq!((c.html_tags, c.entities, c.markdown), (2, 1, 1));
    }
}
