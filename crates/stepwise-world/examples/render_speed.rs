//! Time step rendering, one thread: `cargo run --release -p stepwise-world --example render_speed`.
use std::time::Instant;
use stepwise_world::Domain;
use stepwise_world::plan::plan;
fn main() {
    for domain in [Domain::Cooking, Domain::Assembly] {
        let plans: Vec<_> = (0..40).map(|i| plan(0, domain, i).unwrap()).collect();
        let t = Instant::now();
        let mut n = 0;
        for p in &plans {
            n += std::hint::black_box(stepwise_world::render::render_plan_steps(p, 0, 224)).len();
        }
        let dt = t.elapsed().as_secs_f64();
        println!("{domain:?}: {n} images in {dt:.2} s = {:.2} ms/image (one thread)", dt * 1e3 / n as f64);
        let t = Instant::now();
        for p in &plans {
            for s in 0..p.steps.len() {
                std::hint::black_box(stepwise_world::render::render_plan_step(p, 0, s, 224));
            }
        }
        println!(
            "  one step at a time (backdrop per image): {:.2} ms/image",
            t.elapsed().as_secs_f64() * 1e3 / n as f64
        );
        // The background alone, and the lighting and noise pass alone (no shapes).
        let style =
            stepwise_world::render::style::Style::new(domain, &mut stepwise_world::plan::stream(0, domain, 0, "style"));
        let t = Instant::now();
        let mut c = stepwise_world::render::raster::Canvas::new(224, 224, style.camera);
        for _ in 0..100 {
            c = stepwise_world::render::raster::Canvas::new(224, 224, style.camera);
            c.fill(|p| style.background(p));
        }
        println!("  background only: {:.2} ms/image", t.elapsed().as_secs_f64() * 10.0);
        let t = Instant::now();
        for _ in 0..100 {
            std::hint::black_box(
                c.clone().finish(
                    |p| [style.light(p); 3],
                    |x, y| stepwise_world::render::raster::hash2(x as i32, y as i32, 3),
                ),
            );
        }
        println!("  lighting + noise only: {:.2} ms/image", t.elapsed().as_secs_f64() * 10.0);
    }
}
