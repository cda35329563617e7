//! Step images: the scene after each step, drawn deterministically from (seed, procedure, step), so an image
//! can be rendered on demand instead of stored.
//!
//! - [`raster`]: anti-aliased signed-distance rasteriser with a camera and lighting
//! - [`style`]: the per-procedure background, lighting and camera jitter
//! - [`paint`]: painter, item/tool icons
//! - [`kitchen`], [`workshop`]: the two domains' scenes
//! - [`font`]: a bitmap font for contact-sheet labels

pub mod font;
pub mod kitchen;
pub mod paint;
pub mod raster;
pub mod style;
pub mod workshop;

use image::RgbImage;

use crate::model::Domain;
use stepwise_core::rng::ChaCha8Rng;

use crate::plan::{Plan, stream};
use paint::Painter;
use raster::{Canvas, hash2};
use style::Style;

/// What every step image of a procedure shares: its style and the lit-less background canvas. Compute it
/// once per procedure ([`backdrop`]) and draw each step on a copy ([`draw_step`]).
#[derive(Clone)]
pub struct Backdrop {
    pub style: Style,
    canvas: Canvas,
}

/// The backdrop of a procedure of `domain`, its style drawn from `style_rng` (the procedure's own stream,
/// or a shared style's: see `crate::corpus::style_stream`).
pub fn backdrop(domain: Domain, style_rng: &mut ChaCha8Rng, size: u32) -> Backdrop {
    let style = Style::new(domain, style_rng);
    let mut canvas = Canvas::new(size as usize, size as usize, style.camera);
    canvas.fill(|p| style.background(p));
    Backdrop { style, canvas }
}

/// The backdrop of `plan` in its own style (each procedure its own background, lighting and camera).
pub fn own_backdrop(plan: &Plan, seed: u64, size: u32) -> Backdrop {
    let domain = plan.spec.domain;
    backdrop(domain, &mut stream(seed, domain, plan.index, "style"), size)
}

/// Render step `step` of `plan` (the world after that step) as a `size`×`size` image, in its own style.
pub fn render_plan_step(plan: &Plan, seed: u64, step: usize, size: u32) -> RgbImage {
    draw_step(plan, seed, step, &own_backdrop(plan, seed, size))
}

/// Render every step of `plan` in its own style; the backdrop (the same for all steps) is computed once.
pub fn render_plan_steps(plan: &Plan, seed: u64, size: u32) -> Vec<RgbImage> {
    let b = own_backdrop(plan, seed, size);
    (0..plan.steps.len()).map(|s| draw_step(plan, seed, s, &b)).collect()
}

/// Draw step `step` of `plan` on (a copy of) `backdrop`, then light it and add per-image sensor noise.
pub fn draw_step(plan: &Plan, seed: u64, step: usize, backdrop: &Backdrop) -> RgbImage {
    let style = &backdrop.style;
    let mut painter =
        Painter { canvas: backdrop.canvas.clone(), shadow_dir: [-style.light_dir[0], -style.light_dir[1]] };
    match plan.spec.domain {
        Domain::Cooking => kitchen::draw(&mut painter, plan, step),
        Domain::Assembly => workshop::draw(&mut painter, plan, step),
    }
    let noise_seed =
        (stepwise_core::hash::hash64(&[&seed.to_le_bytes(), &plan.index.to_le_bytes(), &(step as u64).to_le_bytes()])
            & 0xffff_ffff) as u32;
    painter.canvas.finish(
        |p| {
            let l = style.light(p);
            [l * style.tint[0], l * style.tint[1], l * style.tint[2]]
        },
        |x, y| (hash2(x as i32, y as i32, noise_seed) - 0.5) * 7.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan;

    fn diff(a: &RgbImage, b: &RgbImage) -> f64 {
        a.as_raw().iter().zip(b.as_raw()).map(|(x, y)| (*x as f64 - *y as f64).abs()).sum::<f64>()
            / a.as_raw().len() as f64
    }

    #[test]
    fn rendering_is_deterministic_and_steps_differ() {
        for domain in [Domain::Cooking, Domain::Assembly] {
            for index in 0..12 {
                let p = plan(4, domain, index).unwrap();
                let mut prev: Option<RgbImage> = None;
                let all = render_plan_steps(&p, 4, 96);
                for s in 0..p.steps.len() {
                    let a = render_plan_step(&p, 4, s, 96);
                    let b = render_plan_step(&p, 4, s, 96);
                    assert_eq!(a, b);
                    assert_eq!(a, all[s], "batch and single-step rendering agree");
                    if let Some(prev) = &prev {
                        // Beyond sensor noise (mean absolute difference about 1.75 per channel).
                        let d = diff(prev, &a);
                        assert!(
                            d > 1.9,
                            "{domain:?} {index} step {s}: only {d:.2} changed ({:?})",
                            p.steps[s].iter().map(|&x| p.actions[x].verb()).collect::<Vec<_>>()
                        );
                    }
                    prev = Some(a);
                }
            }
        }
    }
}
