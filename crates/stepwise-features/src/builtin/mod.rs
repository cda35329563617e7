//! Encoders that need no downloaded weights.
//!
//! - [`word2vec`]: skip-gram with negative sampling trained on the corpus (text, fitted)
//! - [`tfidf`]: TF-IDF over the corpus vocabulary (text, fitted)
//! - [`descriptor`]: colour + gradient-orientation + tiny-image descriptor (image, no parameters)
//! - [`tokenize`]: the word tokenizer both text encoders share
//! - [`fitted`]: loading or fitting (and saving) a corpus-trained encoder's state

pub mod descriptor;
pub mod fitted;
pub mod tfidf;
pub mod tokenize;
pub mod word2vec;
