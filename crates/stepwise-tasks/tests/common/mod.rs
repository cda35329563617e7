//! What the generation tests share: a synthetic corpus whose vectors have a per-procedure style (like the
//! built-in world), and one task generated from it.

use rand::Rng;
use stepwise_core::rng::rng_for;
use stepwise_core::{Procedure, Step, Task};
use stepwise_features::Vectors;
use stepwise_tasks::catalog::FeatureSources;
use stepwise_tasks::{GenerateConfig, Inputs, Mode, generate};

pub const DIM: usize = 16;

/// `n_procs` procedures of `n_steps` steps; vectors are a per-procedure style (drawn from `seed`) times `style`
/// plus noise: strong enough to matter, weak enough that knob 3's constraint can be met.
pub fn styled_corpus(n_procs: usize, n_steps: usize, seed: u64, style: f32) -> (Vec<Procedure>, Vectors) {
    let mut procs = Vec::new();
    let mut ids = Vec::new();
    let mut data = Vec::new();
    for p in 0..n_procs {
        let pid = format!("synth/{p:03}");
        let mut rng = rng_for(seed, &pid);
        let look: Vec<f32> = (0..DIM).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut steps = Vec::new();
        for s in 0..n_steps {
            let img = format!("images/{p:03}_{s}.jpg");
            steps.push(Step {
                title: Some(format!("Step {s}: do thing {} of {p}", s * 7 % 11)),
                text: Some(format!("Text of step {s} in procedure {p}.")),
                images: vec![img.clone()],
                ..Default::default()
            });
            for prefix in [format!("image:{img}"), format!("title:{pid}#{s}"), format!("text:{pid}#{s}")] {
                ids.push(prefix);
                data.extend(look.iter().map(|x| style * x + rng.random_range(-0.5f32..0.5)));
            }
        }
        procs.push(Procedure {
            id: pid,
            category: Some(if p % 2 == 0 { "a" } else { "b" }.into()),
            steps,
            ..Default::default()
        });
    }
    (procs, Vectors::new(DIM, ids, data))
}

pub fn run(
    procs: &[Procedure],
    v: &Vectors,
    task: Task,
    mode: Mode,
    cfg: &GenerateConfig,
) -> stepwise_tasks::Generated {
    let inputs = Inputs {
        procedures: procs,
        sources: FeatureSources { features: v, extra_pool: None, allow_missing: false },
        splits: None,
    };
    generate(task, &inputs, cfg, mode).unwrap()
}
