//! Write a contact sheet of one procedure: `cargo run -p stepwise-world --example sheet -- cooking 3 /tmp/sheet.png`.
use stepwise_world::contact_sheet::contact_sheet;
use stepwise_world::{Domain, WorldParams, generate_procedure, render_procedure_images};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let domain = Domain::parse(args.get(1).map(String::as_str).unwrap_or("cooking")).expect("cooking or assembly");
    let index: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let out = args.get(3).cloned().unwrap_or_else(|| "/tmp/sheet.png".into());
    let params = WorldParams::new(7, domain, index + 1);
    let p = generate_procedure(&params, index).expect("procedure");
    let images = render_procedure_images(&params, index).expect("images");
    contact_sheet(&p, &images, 5).save(&out).expect("save");
    println!("{out}: {} steps", images.len());
}
