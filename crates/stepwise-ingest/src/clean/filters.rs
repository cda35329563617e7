//! Procedure filters of the cleaner. Metadata filters (id, title, category, language) run before the word model
//! is learned, so dropped procedures do not shape it; structural filters (empty steps, step counts) run on the
//! cleaned text.

use stepwise_core::Procedure;

use super::config::{CleanConfig, CompiledPatterns};
use crate::text::lang::detect_lang;

/// The first metadata filter `p` fails, if any.
pub fn metadata_filter(p: &Procedure, cfg: &CleanConfig, pats: &CompiledPatterns) -> Option<&'static str> {
    if pats.exclude_id.iter().any(|r| r.is_match(&p.id)) {
        return Some("exclude_id");
    }
    if let Some(t) = &p.title
        && pats.exclude_title.iter().any(|r| r.is_match(t))
    {
        return Some("exclude_title");
    }
    let cat = p.category.as_deref();
    if cat.is_some_and(|c| cfg.exclude_category.iter().any(|x| x == c)) {
        return Some("exclude_category");
    }
    if !cfg.include_category.is_empty() && !cat.is_some_and(|c| cfg.include_category.iter().any(|x| x == c)) {
        return Some("include_category");
    }
    if !cfg.languages.is_empty() {
        let lang = procedure_language(p);
        if !lang.is_some_and(|l| cfg.languages.iter().any(|x| x.eq_ignore_ascii_case(&l))) {
            return Some("language");
        }
    }
    None
}

/// The procedure's language: the primary subtag of its declared `lang` (`en-US` → `en`), else a guess from the
/// first few thousand characters of its steps.
pub fn procedure_language(p: &Procedure) -> Option<String> {
    if let Some(l) = p.lang.as_deref().filter(|l| !l.trim().is_empty()) {
        return Some(l.split(['-', '_']).next().unwrap_or(l).to_ascii_lowercase());
    }
    let mut sample = String::new();
    for s in &p.steps {
        for t in [&s.title, &s.text].into_iter().flatten() {
            sample.push_str(t);
            sample.push('\n');
        }
        if sample.len() > 4000 {
            break;
        }
    }
    detect_lang(&sample).map(str::to_string)
}

/// True when a step has nothing left: no title, no text (after trimming) and no image.
pub fn is_empty_step(s: &stepwise_core::Step) -> bool {
    let blank = |t: &Option<String>| t.as_deref().is_none_or(|t| t.trim().is_empty());
    blank(&s.title) && blank(&s.text) && s.images.is_empty()
}

/// The structural filter `p` fails, if any.
pub fn structure_filter(p: &Procedure, cfg: &CleanConfig) -> Option<&'static str> {
    let n = p.steps.len();
    if cfg.min_steps.is_some_and(|lo| n < lo) {
        return Some("min_steps");
    }
    if cfg.max_steps.is_some_and(|hi| n > hi) {
        return Some("max_steps");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepwise_core::Step;

    fn proc(id: &str, title: &str, cat: Option<&str>, lang: Option<&str>, steps: usize) -> Procedure {
        Procedure {
            id: id.into(),
            title: Some(title.into()),
            category: cat.map(str::to_string),
            lang: lang.map(str::to_string),
            steps: (0..steps)
                .map(|_| Step { text: Some("Stir the soup and add the salt.".into()), ..Default::default() })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn metadata_filters_in_order() {
        let cfg = CleanConfig {
            exclude_id: vec!["^craft/".into()],
            exclude_title: vec!["(?i)soap".into()],
            exclude_category: vec!["toys".into()],
            languages: vec!["en".into()],
            ..Default::default()
        };
        let pats = cfg.compile().unwrap();
        assert_eq!(metadata_filter(&proc("craft/1", "Soap", None, None, 3), &cfg, &pats), Some("exclude_id"));
        assert_eq!(metadata_filter(&proc("a", "Homemade SOAP", None, None, 3), &cfg, &pats), Some("exclude_title"));
        assert_eq!(metadata_filter(&proc("a", "Bread", Some("toys"), None, 3), &cfg, &pats), Some("exclude_category"));
        assert_eq!(metadata_filter(&proc("a", "Bread", None, Some("zh"), 3), &cfg, &pats), Some("language"));
        assert_eq!(metadata_filter(&proc("a", "Bread", None, Some("en-GB"), 3), &cfg, &pats), None);
        assert_eq!(metadata_filter(&proc("a", "Bread", None, None, 3), &cfg, &pats), None, "detected as English");
    }

    #[test]
    fn step_bounds() {
        let cfg = CleanConfig::default();
        assert_eq!(structure_filter(&proc("a", "t", None, None, 2), &cfg), Some("min_steps"));
        assert_eq!(structure_filter(&proc("a", "t", None, None, 26), &cfg), Some("max_steps"));
        assert_eq!(structure_filter(&proc("a", "t", None, None, 25), &cfg), None);
    }

    #[test]
    fn bad_pattern_is_a_usage_error() {
        let cfg = CleanConfig { exclude_title: vec!["(".into()], ..Default::default() };
        let e = cfg.compile().unwrap_err();
        assert!(e.to_string().contains("--exclude-title") && e.exit_code() == 2);
    }
}
