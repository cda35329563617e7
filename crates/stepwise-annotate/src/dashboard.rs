//! The admin dashboard: progress per modality, each person's accuracy and agreement, the items still open, and
//! the invite form. Numbers come from [`crate::progress`], the same code the exports use.

use std::fmt::Write;

use stepwise_core::Result;

use crate::db::Db;
use crate::pages::{esc, num, page, pct};
use crate::progress::Progress;
use crate::study::Study;

/// Most open items listed (the count is always shown).
const OPEN_ITEMS_SHOWN: usize = 100;

pub async fn render(study: &Study, db: &Db, csrf: &str, new_invites: Option<&[(String, String)]>) -> Result<String> {
    let workers = db.workers().await?;
    let assignments = db.assignments(None).await?;
    let p = Progress::of(study, &workers, &assignments);
    let r = &study.rules;
    let mut b = String::new();
    let _ = write!(
        b,
        "<header class=\"progress\"><h1>Study dashboard</h1><form method=\"post\" action=\"/logout\" class=\"inline\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\" class=\"link\">Sign out</button>\
         </form></header>\n<p>{} study · {} instances · modalities {} · {} judgements per item · HITs of {} · \
         qualification: {} · censoring below {} after {} items</p>\n",
        esc(csrf),
        r.kind.as_str(),
        study.instances.len(),
        r.modalities.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", "),
        r.judgements,
        r.hit_size,
        if r.qualification_items == 0 {
            "none".to_string()
        } else {
            format!("{} items, pass at {}", r.qualification_items, pct(Some(r.qualification_threshold)))
        },
        pct(Some(r.censor_floor)),
        r.censor_min_items
    );
    if let Some(made) = new_invites {
        b.push_str("<h2>New invite links</h2>\n<p>Give each person their own link; it signs them in.</p>\n<table id=\"invites\"><tr><th>person</th><th>link</th></tr>\n");
        for (label, link) in made {
            let _ = writeln!(b, "<tr><td>{}</td><td><code class=\"invite\">{}</code></td></tr>", esc(label), esc(link));
        }
        b.push_str("</table>\n");
    }
    b.push_str(
        "<h2>Progress</h2>\n<table id=\"progress-table\"><tr><th>modality</th><th>items</th><th>complete</th>\
         <th>judgements</th><th>wanted</th><th>open now</th></tr>\n",
    );
    for m in &p.modalities {
        let _ = writeln!(
            b,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            m.modality.as_str(),
            m.items,
            m.complete,
            m.judgements,
            m.wanted,
            m.open
        );
    }
    b.push_str("</table>\n<h2>People</h2>\n");
    if p.workers.is_empty() {
        b.push_str("<p>No one yet: make invite links below.</p>\n");
    } else {
        b.push_str(
            "<table id=\"workers\"><tr><th>person</th><th>status</th><th>qualification</th><th>judgements</th>\
             <th>accuracy (PMR)</th><th>agreement (κ)</th><th>invite link</th></tr>\n",
        );
        for (w, row) in p.workers.iter().zip(&workers) {
            let _ = writeln!(
                b,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{} <small>({} items)</small></td><td><code>/join/{}</code></td></tr>",
                esc(&w.label),
                esc(&w.status),
                pct(w.qualification_score),
                w.judgements,
                pct(w.accuracy),
                num(w.agreement),
                w.agreement_items,
                esc(&row.invite)
            );
        }
        b.push_str("</table>\n");
    }
    let _ = writeln!(b, "<h2>Items still open: <span id=\"open-count\">{}</span></h2>", p.open_items.len());
    if !p.open_items.is_empty() {
        b.push_str("<table id=\"open-items\"><tr><th>instance</th><th>modality</th><th>judgements</th></tr>\n");
        for o in p.open_items.iter().take(OPEN_ITEMS_SHOWN) {
            let _ = writeln!(
                b,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{} of {}</td></tr>",
                esc(&study.instances[o.instance].id),
                o.modality.as_str(),
                o.judgements,
                r.judgements
            );
        }
        b.push_str("</table>\n");
        if p.open_items.len() > OPEN_ITEMS_SHOWN {
            let _ = writeln!(b, "<p>… and {} more.</p>", p.open_items.len() - OPEN_ITEMS_SHOWN);
        }
    }
    let _ = write!(
        b,
        "<h2>Invite people</h2>\n<form method=\"post\" action=\"/admin/invites\" id=\"invite-form\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label>How many <input type=\"number\" name=\"count\" min=\"1\" max=\"{}\" value=\"1\" required></label> \
         <label>Name prefix <input type=\"text\" name=\"label\" maxlength=\"60\" value=\"annotator\"></label> \
         <button type=\"submit\">Make invite links</button></form>\n\
         <h2>Export</h2>\n<p><a href=\"/admin/export.zip\" id=\"export-link\" download>Download the export</a> \
         (a zip of what <code>stepwise annotate export STUDY -o OUT</code> writes with its default options: the \
         files <code>stepwise eval</code> and <code>stepwise generate</code> read, the human tables, every \
         judgement).</p>",
        esc(csrf),
        crate::server::MAX_INVITES
    );
    Ok(page("Study dashboard", &b))
}
