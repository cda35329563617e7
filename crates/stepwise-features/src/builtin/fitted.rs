//! Fitted encoders keep their state in a folder (a feature store's `model/`): loaded when present, otherwise
//! fitted on [`EncoderContext::fit_texts`] and saved there, so the store can re-create the encoder later.

use std::path::Path;

use stepwise_core::IoResultExt;

use crate::FeatureError;
use crate::registry::EncoderContext;

/// Load the state from `ctx.state_dir` when `marker` (the file written last by `save`) exists there; otherwise
/// fit on `ctx.fit_texts` and save into `ctx.state_dir` (when given).
pub fn load_or_fit<T>(
    ctx: &EncoderContext,
    encoder: &str,
    marker: &str,
    load: impl FnOnce(&Path) -> Result<T, FeatureError>,
    fit: impl FnOnce(&[String]) -> Result<T, FeatureError>,
    save: impl FnOnce(&T, &Path) -> Result<(), FeatureError>,
) -> Result<T, FeatureError> {
    if let Some(dir) = &ctx.state_dir
        && dir.join(marker).is_file()
    {
        return load(dir);
    }
    let Some(texts) = &ctx.fit_texts else {
        let where_ = match &ctx.state_dir {
            Some(d) => format!("{} holds no fitted model", d.display()),
            None => "no fitted model was given".to_string(),
        };
        return Err(FeatureError::MissingModel(format!(
            "encoder `{encoder}` is trained on a corpus and {where_}: embed a corpus first \
             (`stepwise embed CORPUS --encoder {encoder} -o FEATURES`) and re-create the encoder from that store"
        )));
    };
    let state = fit(texts)?;
    if let Some(dir) = &ctx.state_dir {
        std::fs::create_dir_all(dir).at(dir)?;
        save(&state, dir)?;
    }
    Ok(state)
}
