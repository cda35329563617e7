//! stepwise-world: the built-in synthetic procedure world — "CLEVR for procedures".
//!
//! A small explicit world (ingredients and parts, tools, containers and habitats, actions with preconditions
//! and effects) generates procedures whose ground truth is exact: the dependency DAG, every valid step order
//! (or its count and uniform samples), each entity's state after each step, explicit and implicit arguments,
//! prop counts and orientations. Text is realised from varied templates; each step has a rendered image of
//! the scene after it, deterministic from (seed, procedure, step), so images can be rendered on demand.
//! The schema of the ground truth is documented in [`truth`].
//!
//! Image files are named by a hash of (procedure, step) (`images/world-cooking_000042/3f09c2a17b4e.jpg`,
//! [`truth::image_path`]), so paths do not tell the order. Each procedure has its own visual style by default
//! (the "same background" shortcut of real photos, on purpose); `WorldParams::styles` makes procedures share a
//! fixed number of styles instead, to dial that shortcut down.
//!
//! - [`model`]: entities, props, states, actions; [`model::apply`] checks preconditions and reports accesses
//! - [`builder`]: what a category's recipe function uses to declare the world and emit actions
//! - [`cooking`], [`assembly`]: the two domains' catalogues and categories
//! - [`plan`]: action DAG, authored linearisation, steps bundling actions, step DAG, states after each step
//! - [`orders`]: exact counting, enumeration and uniform sampling of valid orders
//! - [`text`]: step text with spans, ellipsis, implicit arguments, reified intermediates, noise
//! - [`truth`]: the typed `annotations.world` payload and the corpus record of a procedure
//! - [`render`]: the step images
//! - [`contact_sheet`]: step images side by side with captions
//! - [`corpus`]: parameters, parallel generation, writing a corpus, on-demand images

pub mod assembly;
pub mod builder;
pub mod contact_sheet;
pub mod cooking;
pub mod corpus;
pub mod model;
pub mod orders;
pub mod plan;
pub mod render;
pub mod text;
pub mod truth;

pub use corpus::{
    CorpusSummary, WorldImages, WorldParams, generate, generate_procedure, render_image, render_procedure_images,
    write_corpus,
};
pub use model::Domain;
pub use truth::WorldTruth;
