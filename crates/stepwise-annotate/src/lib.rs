//! stepwise-annotate: the human half of the sequencing paper (Wu et al., ACL 2022, §3.2 and appendix B) as a
//! web app. People order scrambled steps (multimodal, text-only, image-only), say how sure they are and which
//! modality helped, pass a qualification round and are censored below an accuracy floor; a second kind of
//! study collects alternative valid orders. Exports feed `stepwise eval` (human rows, agreement) and
//! `stepwise generate --task sequencing --alt-orders` (multiple references).
//!
//! - [`study`]: a study folder (rules, instances, admin password hash) — `stepwise annotate create`
//! - [`db`]: SQLite (default, in the study folder) or PostgreSQL, migrations, queries
//! - [`schedule`]: which items a person gets next (HITs, modality gap)
//! - [`queue`]: the same rules on counts kept in the database (no scan per HIT; several processes agree)
//! - [`judgements`]: the answer format, validation, per-person accuracy and agreement
//! - [`progress`]: where a study stands (dashboard and exports)
//! - [`tables`]: the paper's human tables (which modality helped, confidence, κ per modality, time per HIT)
//! - [`server`]: routes, sessions, CSRF, qualification and censoring — `stepwise annotate serve`
//! - [`pages`], [`dashboard`]: server-rendered HTML (with `static/app.js` for drag and drop)
//! - [`tls`]: HTTPS (serving TLS, or trusting a proxy's `X-Forwarded-Proto`): `Secure` cookies and HSTS
//! - [`export`]: `stepwise annotate export`
//! - [`auth`]: tokens and password hashes
//! - [`client`], [`simulate`]: simulated annotators over HTTP (`stepwise bench annotate`, the pilot study)

pub mod auth;
pub mod client;
pub mod dashboard;
pub mod db;
pub mod export;
pub mod judgements;
pub mod pages;
pub mod progress;
pub mod queue;
pub mod schedule;
pub mod server;
pub mod simulate;
pub mod study;
pub mod tables;
pub mod tls;

pub use study::{Modality, Study, StudyKind, StudyRules};
