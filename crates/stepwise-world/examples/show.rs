//! Print the text of a few generated procedures: `cargo run -p stepwise-world --example show -- cooking 5`.
use stepwise_world::model::Domain;
use stepwise_world::plan::{plan, stream};
use stepwise_world::text::realise;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let domain = Domain::parse(args.get(1).map(String::as_str).unwrap_or("cooking")).expect("cooking or assembly");
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    for i in 0..n {
        let p = plan(7, domain, i).expect("plan");
        let t = realise(&p, &mut stream(7, domain, i, "text"));
        println!("== {} ({}): {} | {} steps, {} actions", p.title, p.category, p.goal, p.steps.len(), p.actions.len());
        println!("   ingredients: {:?}", t.ingredients);
        for (s, st) in t.steps.iter().enumerate() {
            println!("{s:2}. [{}] {}", st.title.as_deref().unwrap_or("-"), st.text);
        }
        println!("   step DAG: {:?}", p.step_edges);
    }
}
