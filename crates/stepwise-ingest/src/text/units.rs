//! Numbers fused with a measurement unit or a word: `350F` → `350 F`, `2cups` → `2 cups`, `1/2tsp` → `1/2 tsp`,
//! `15min` (from `10-15min`) → `15 min`, `2eggs` → `2 eggs`.
//!
//! A token splits when it is a number (digits, possibly with `.`, `,` or `/` between digits) followed only by
//! letters that are a known unit, or a known word of three letters or more. Ordinals (`1st`, `2nd`, `4th`),
//! decades (`1970s`) and codes such as `3D` or `mp3` are left alone.

/// Units of measure, time and temperature, lowercase.
const UNITS: &[&str] = &[
    "am",
    "c",
    "can",
    "cans",
    "cl",
    "clove",
    "cloves",
    "cm",
    "cup",
    "cups",
    "day",
    "days",
    "dl",
    "f",
    "feet",
    "fl",
    "floz",
    "foot",
    "ft",
    "g",
    "gal",
    "gallon",
    "gallons",
    "gb",
    "ghz",
    "gr",
    "gram",
    "grams",
    "h",
    "hour",
    "hours",
    "hr",
    "hrs",
    "in",
    "inch",
    "inches",
    "kb",
    "kcal",
    "kg",
    "kilo",
    "kilos",
    "kw",
    "l",
    "lb",
    "lbs",
    "liter",
    "liters",
    "litre",
    "litres",
    "m",
    "mb",
    "mg",
    "mhz",
    "min",
    "mins",
    "minute",
    "minutes",
    "ml",
    "mm",
    "ounce",
    "ounces",
    "oz",
    "pc",
    "pcs",
    "piece",
    "pieces",
    "pint",
    "pints",
    "pkg",
    "pm",
    "pound",
    "pounds",
    "pt",
    "qt",
    "quart",
    "quarts",
    "s",
    "sec",
    "second",
    "seconds",
    "secs",
    "slice",
    "slices",
    "stick",
    "sticks",
    "t",
    "tablespoon",
    "tablespoons",
    "tb",
    "tbs",
    "tbsp",
    "tbsps",
    "teaspoon",
    "teaspoons",
    "tsp",
    "tsps",
    "v",
    "w",
    "wk",
    "wks",
    "x",
    "yd",
];

/// Suffixes that make a number an ordinal, a decade or a code, not a quantity.
const NOT_UNITS: &[&str] = &["st", "nd", "rd", "th", "s", "x", "d", "k", "v"];

/// Where to split `token` (a byte offset: number on the left, unit on the right), if it is a fused quantity.
/// `is_word` says whether a lowercase string is a known word.
pub fn split_number_unit(token: &str, is_word: impl Fn(&str) -> bool) -> Option<usize> {
    let b = token.as_bytes();
    if !b.first()?.is_ascii_digit() {
        return None;
    }
    let mut i = 0;
    while i < b.len()
        && (b[i].is_ascii_digit()
            || (matches!(b[i], b'.' | b',' | b'/') && i + 1 < b.len() && b[i + 1].is_ascii_digit()))
    {
        i += 1;
    }
    let rest = &token[i..];
    if rest.is_empty() || !rest.chars().all(char::is_alphabetic) {
        return None;
    }
    let lower = rest.to_lowercase();
    if NOT_UNITS.contains(&lower.as_str()) {
        return None;
    }
    let known = UNITS.binary_search(&lower.as_str()).is_ok() || (lower.chars().count() >= 3 && is_word(&lower));
    known.then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(t: &str) -> Option<(&str, &str)> {
        split_number_unit(t, |w| ["eggs", "large"].contains(&w)).map(|i| (&t[..i], &t[i..]))
    }

    #[test]
    fn units_are_sorted_for_binary_search() {
        let mut sorted = UNITS.to_vec();
        sorted.sort();
        assert_eq!(sorted, UNITS);
    }

    #[test]
    fn splits_quantities() {
        assert_eq!(split("350F"), Some(("350", "F")));
        assert_eq!(split("2cups"), Some(("2", "cups")));
        assert_eq!(split("1/2tsp"), Some(("1/2", "tsp")));
        assert_eq!(split("15min"), Some(("15", "min")));
        assert_eq!(split("1,000g"), Some(("1,000", "g")));
        assert_eq!(split("2eggs"), Some(("2", "eggs")));
        assert_eq!(split("128GB"), Some(("128", "GB")));
    }

    #[test]
    fn leaves_ordinals_codes_and_words() {
        for t in ["1st", "2nd", "4th", "1970s", "3D", "mp3", "350", "2x4", "3zz", "cups"] {
            assert_eq!(split(t), None, "{t}");
        }
    }
}
