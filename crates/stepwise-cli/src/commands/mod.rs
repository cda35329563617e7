//! One module per command.
pub mod demo;
pub mod ingest;
pub mod clean;
pub mod stats;
pub mod embed;
pub mod neighbors;
pub mod generate;
pub mod sweep;
pub mod audit;
pub mod eval;
pub mod baseline;
pub mod select_golden;
pub mod report;
pub mod world;
pub mod models;
pub mod bench;
