//! Time the parts of generation, single-threaded: `cargo run --release -p stepwise-world --example profile`.
use std::time::Instant;
use stepwise_world::Domain;
use stepwise_world::plan::{plan, stream};
fn main() {
    let n = 2000u64;
    let mut t = [0f64; 6];
    let mut bytes = 0usize;
    for i in 0..n {
        let s = Instant::now();
        let p = plan(0, Domain::Cooking, i).unwrap();
        t[0] += s.elapsed().as_secs_f64();
        let s = Instant::now();
        let text = stepwise_world::text::realise(&p, &mut stream(0, Domain::Cooking, i, "text"));
        t[1] += s.elapsed().as_secs_f64();
        let s = Instant::now();
        let le = stepwise_world::orders::LinearExtensions::new(p.steps.len(), &p.step_edges).unwrap();
        let _v = le.valid_orders(100, 20, &mut stream(0, Domain::Cooking, i, "orders"));
        t[2] += s.elapsed().as_secs_f64();
        let s = Instant::now();
        let truth = stepwise_world::truth::world_truth(&p, &text);
        let _v = serde_json::to_value(&truth).unwrap();
        t[3] += s.elapsed().as_secs_f64();
        let s = Instant::now();
        let pr = stepwise_world::truth::procedure(&p, &text, 0, 100, 20, None).unwrap();
        t[4] += s.elapsed().as_secs_f64();
        let s = Instant::now();
        let mut buf = Vec::new();
        stepwise_core::json::write_canonical(&mut buf, &pr.to_json()).unwrap();
        bytes += buf.len();
        t[5] += s.elapsed().as_secs_f64();
    }
    let per = |x: f64| x / n as f64 * 1e6;
    println!(
        "µs/procedure: plan {:.0}, text {:.0}, orders {:.0}, truth+to_value {:.0}, procedure (all of 3..4) {:.0}, to_json+write {:.0}; {} bytes",
        per(t[0]),
        per(t[1]),
        per(t[2]),
        per(t[3]),
        per(t[4]),
        per(t[5]),
        bytes / n as usize
    );
}
