//! Text utilities shared by cleaning and statistics.
//!
//! - [`tokenize`]: the one tokenizer (words, numbers, CJK characters) and sentence counting
//! - [`markup`]: HTML/CSS tags, entities, Markdown and BBCode removal
//! - [`normalize`]: NFKC, ASCII folding, whitespace collapsing, missing sentence spaces
//! - [`units`]: numbers fused with units or words ("350F", "2cups")
//! - [`lang`]: a script- and function-word-based language guesser

pub mod lang;
pub mod markup;
pub mod normalize;
pub mod tokenize;
pub mod units;
