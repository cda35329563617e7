//! Server-rendered pages. Every value from a study or a person goes through [`esc`]; the only script is
//! `/static/app.js` (drag and drop, keyboard moves, the alternatives list), served from this crate.

use std::fmt::Write;

use stepwise_core::sequencing::SequencingItem;

use crate::judgements::HELPED;
use crate::study::Modality;

pub const APP_JS: &str = include_str!("../static/app.js");
pub const APP_CSS: &str = include_str!("../static/app.css");

/// HTML-escape text for element content and quoted attribute values.
pub use stepwise_core::html::escape as esc;

/// A whole page around `body` (already HTML).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · stepwise annotate</title><link rel=\"stylesheet\" href=\"/static/app.css\">\
         <script src=\"/static/app.js\" defer></script></head>\n<body>\n<main>\n{body}\n</main>\n</body></html>\n",
        esc(title)
    )
}

/// A page with one message (errors, "thank you", "not qualified").
pub fn message(title: &str, text: &str) -> String {
    page(title, &format!("<h1>{}</h1>\n<p class=\"message\">{}</p>", esc(title), esc(text)))
}

/// What the work page shows about the current item.
pub struct WorkView<'a> {
    pub assignment: i64,
    pub csrf: &'a str,
    pub modality: Modality,
    pub position: usize,
    pub hit_items: usize,
    pub hit_seq: i64,
    pub qualification: bool,
    /// Items in the order shown (index into the instance's items, item).
    pub items: Vec<(usize, &'a SequencingItem)>,
    /// Alternative-order studies: show the authored order and collect alternatives.
    pub alternatives: bool,
}

fn item_html(out: &mut String, index: usize, item: &SequencingItem, modality: Modality, movable: bool) {
    let _ = write!(
        out,
        "<li class=\"step{}\" data-item=\"{index}\"{}>",
        if movable { " movable" } else { "" },
        if movable { " tabindex=\"0\" aria-roledescription=\"movable step\"" } else { "" }
    );
    if movable {
        out.push_str("<span class=\"handle\" aria-hidden=\"true\">⠿</span>");
    }
    out.push_str("<div class=\"content\">");
    if modality.shows_images() {
        for img in &item.images {
            let _ = write!(out, "<img src=\"/img/{}\" alt=\"step photo\" draggable=\"false\">", esc(&url_path(img)));
        }
    }
    if modality.shows_text() {
        if let Some(t) = item.title.as_deref().filter(|t| !t.trim().is_empty()) {
            let _ = write!(out, "<p class=\"title\">{}</p>", esc(t));
        }
        if let Some(t) = item.text.as_deref().filter(|t| !t.trim().is_empty()) {
            let _ = write!(out, "<p class=\"text\">{}</p>", esc(t));
        }
    }
    out.push_str("</div>");
    if movable {
        out.push_str(
            "<span class=\"moves\"><button type=\"button\" class=\"up\" aria-label=\"Move up\">↑</button>\
             <button type=\"button\" class=\"down\" aria-label=\"Move down\">↓</button></span>",
        );
    }
    out.push_str("</li>\n");
}

pub fn work_page(v: &WorkView<'_>) -> String {
    let mut b = String::new();
    let what = if v.qualification { "Qualification" } else { "HIT" };
    let _ = writeln!(
        b,
        "<header class=\"progress\"><span id=\"progress\">{what} {} · item {} of {}</span>\
         <progress value=\"{}\" max=\"{}\"></progress><form method=\"post\" action=\"/logout\" class=\"inline\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\" class=\"link\">Leave</button></form></header>",
        v.hit_seq,
        v.position + 1,
        v.hit_items,
        v.position,
        v.hit_items,
        esc(v.csrf)
    );
    let _ = write!(
        b,
        "<form method=\"post\" action=\"/work/{}\" id=\"answer\" data-kind=\"{}\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\n",
        v.assignment,
        if v.alternatives { "alternatives" } else { "ordering" },
        esc(v.csrf)
    );
    if v.alternatives {
        b.push_str(
            "<h1>Could these steps be done in another order?</h1>\n<p class=\"help\">The steps below are in the \
             order the author wrote them. If the procedure would also work in a different order, arrange the \
             steps that way (drag them, or focus a step and use the arrow buttons or Alt+↑/↓) and press \
             <em>Add this order</em>. Add as many orders as work; add none if only the original order works.</p>\n\
             <ol id=\"steps\" class=\"steps\">\n",
        );
        for (i, item) in &v.items {
            item_html(&mut b, *i, item, v.modality, true);
        }
        let original: Vec<String> = v.items.iter().map(|(i, _)| i.to_string()).collect();
        let _ = write!(
            b,
            "</ol>\n<p><button type=\"button\" id=\"add-order\">Add this order</button> \
             <button type=\"button\" id=\"reset-order\">Back to the original order</button></p>\n\
             <h2>Alternative orders you added: <span id=\"alt-count\">0</span></h2>\n<ol id=\"alt-list\"></ol>\n\
             <p id=\"alt-error\" class=\"error\" role=\"alert\"></p>\n\
             <input type=\"hidden\" name=\"alternatives\" id=\"alternatives\" value=\"[]\" data-original=\"{}\" \
             data-max=\"{}\">\n",
            original.join(","),
            crate::judgements::MAX_ALTERNATIVES
        );
    } else {
        let how = match v.modality {
            Modality::Multimodal => "Each step shows its text and photo.",
            Modality::Text => "Each step shows its text only.",
            Modality::Image => "Each step shows its photo only.",
        };
        let _ = write!(
            b,
            "<h1>Put the steps in order</h1>\n<p class=\"help\">{how} Drag the steps into the order in which the \
             procedure is done, first at the top. Keyboard: focus a step, then Alt+↑/↓ or its arrow buttons.</p>\n\
             <ol id=\"steps\" class=\"steps\">\n"
        );
        for (i, item) in &v.items {
            item_html(&mut b, *i, item, v.modality, true);
        }
        // Filled with the order shown, so a page whose script did not load still submits a well-formed order.
        let shown: Vec<String> = v.items.iter().map(|(i, _)| i.to_string()).collect();
        let _ = writeln!(b, "</ol>\n<input type=\"hidden\" name=\"order\" id=\"order\" value=\"{}\">", shown.join(","));
        b.push_str("<fieldset><legend>How confident are you in this order?</legend>");
        for c in 1..=5 {
            let label = match c {
                1 => "1 (a guess)",
                5 => "5 (sure)",
                _ => "",
            };
            let _ = write!(
                b,
                "<label><input type=\"radio\" name=\"confidence\" value=\"{c}\" required> {}</label>",
                if label.is_empty() { c.to_string() } else { label.to_string() }
            );
        }
        b.push_str("</fieldset>\n");
        if v.modality == Modality::Multimodal {
            b.push_str("<fieldset><legend>Which modality helped you most?</legend>");
            for h in HELPED {
                let _ = write!(b, "<label><input type=\"radio\" name=\"helped\" value=\"{h}\" required> {h}</label>");
            }
            b.push_str("</fieldset>\n");
        }
    }
    b.push_str(
        "<p id=\"announce\" class=\"visually-hidden\" aria-live=\"polite\"></p>\n\
         <p><button type=\"submit\" id=\"submit\">Submit</button></p>\n</form>",
    );
    page("Order the steps", &b)
}

pub fn login_page(csrf: &str, error: Option<&str>) -> String {
    let err = error.map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", esc(e))).unwrap_or_default();
    page(
        "Admin sign-in",
        &format!(
            "<h1>Admin sign-in</h1>{err}<form method=\"post\" action=\"/admin/login\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <label>Password <input type=\"password\" name=\"password\" autocomplete=\"current-password\" required autofocus></label> \
             <button type=\"submit\">Sign in</button></form>",
            esc(csrf)
        ),
    )
}

/// Percent with one decimal, or an en dash.
pub fn pct(v: Option<f64>) -> String {
    v.map(|x| format!("{:.1}%", 100.0 * x)).unwrap_or_else(|| "–".into())
}

pub fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

/// Image paths are relative paths inside the corpus; each segment is percent-encoded for the URL.
pub fn url_path(p: &str) -> String {
    p.split('/').map(percent_encode).collect::<Vec<_>>().join("/")
}

/// Percent-encode everything but unreserved characters (URL path segments, form values).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_paths_are_percent_encoded() {
        assert_eq!(url_path("images/a b/ç.jpg"), "images/a%20b/%C3%A7.jpg");
        assert_eq!(percent_encode("1,2&x=y"), "1%2C2%26x%3Dy");
    }

    #[test]
    fn work_page_escapes_step_text() {
        let item =
            SequencingItem { step: 0, title: None, text: Some("<script>alert(1)</script>".into()), images: vec![] };
        let html = work_page(&WorkView {
            assignment: 7,
            csrf: "c",
            modality: Modality::Text,
            position: 0,
            hit_items: 1,
            hit_seq: 1,
            qualification: false,
            items: vec![(0, &item), (1, &item)],
            alternatives: false,
        });
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !html.contains("<script>alert"));
        assert!(html.contains("action=\"/work/7\"") && !html.contains("name=\"helped\""));
    }
}
