//! Property test: whatever annotated recipe the SemEval reader accepts (mutations of a valid one), the annotation
//! graph, the family programs on any question, and question generation never panic, and generated questions
//! answer back.

use std::path::Path;

use proptest::prelude::*;
use stepwise_core::r2vq::AnnotationGraph;
use stepwise_ingest::readers::r2vq_conllu::parse_r2vq_conllu;
use stepwise_tasks::r2vq::generate::{R2vqGenConfig, generate_r2vq};
use stepwise_tasks::r2vq::programs::answer_question;

/// Two steps: "Cut the onion with a knife." (hidden result and habitat), "Fry it in a pan." (coreference, roles).
const RECIPE: &str = "# newdoc id = r-1\n# question 2-0 = Where should you cut the onion?\n# answer 2-0 = board\n\
# newpar id = r-1::step01\n# sent_id = r-1::step01::sent01\n# text = Cut the onion with a knife.\n\
1\tCut\tcut\tVERB\tB-EVENT\t_\t_\tResult=chopped_onion.1.1.1|Habitat=board.1.1.1\t_\tCUT\tB-V\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
2\tthe\tthe\tDET\tO\t_\t_\t_\t_\t_\tB-Patient\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
3\tonion\tonion\tNOUN\tB-EXPLICITINGREDIENT\t1\t_\t_\tonion.1.1.3\t_\tI-Patient\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
4\twith\twith\tADP\tO\t_\t_\t_\t_\t_\tB-Instrument\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
5\ta\ta\tDET\tO\t_\t_\t_\t_\t_\tI-Instrument\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
6\tknife\tknife\tNOUN\tB-TOOL\t1\t_\t_\tknife.1.1.6\t_\tI-Instrument\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
7\t.\t.\tPUNCT\tO\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\n\
# newpar id = r-1::step02\n# sent_id = r-1::step02::sent01\n# text = Fry it in a pan.\n\
1\tFry\tfry\tVERB\tB-EVENT\t_\t_\tDrop=onion.1.1.3\t_\tCOOK\tB-V\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
2\tit\tit\tPRON\tB-IMPLICITINGREDIENT\t1\t_\t_\tchopped_onion.1.1.1\t_\tB-Patient\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
3\tin\tin\tADP\tO\t_\t_\t_\t_\t_\tB-Location\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
4\ta\ta\tDET\tO\t_\t_\t_\t_\t_\tI-Location\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
5\tpan\tpan\tNOUN\tB-HABITAT\t1\t_\t_\tpan.2.1.5\t_\tI-Location\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\
6\t.\t.\tPUNCT\tO\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\t_\n\n";

const QUESTIONS: &[&str] = &[
    "How many actions does it take to process the onion?",
    "How many times is the knife used?",
    "How many pans are used?",
    "What should be fried?",
    "Where should you cut the onion?",
    "How do you cut the onion?",
    "How did you get the chopped onion?",
    "What's in the chopped onion?",
    "Cutting the onion and frying it, which comes first?",
    "Where do you fry the chopped onion?",
    "Where was the chopped onion before it was fried?",
    "Are the onion in step 0 and step 1 identical?",
    "Are there more pans?",
    "What is used to cut the onion?",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn programs_and_generation_never_panic_on_what_reads(
        edits in prop::collection::vec((0usize..2200, 0usize..16), 1..5),
        extra in "\\PC{0,40}",
    ) {
        let mut text: Vec<char> = RECIPE.chars().collect();
        for (at, what) in edits {
            let at = at % (text.len() + 1);
            match what {
                0 if at < text.len() => { text.remove(at); }
                1..=12 => text.insert(at, ['\t', '\n', '-', '=', '|', ':', '.', '0', '1', '9', '_', 'B'][what - 1]),
                13 => text.truncate(at),
                _ => text.insert(at, 'é'),
            }
        }
        let text: String = text.into_iter().collect();
        let Ok(doc) = parse_r2vq_conllu(Path::new("m.csv"), &text) else { return Ok(()) };
        for r in &doc.recipes {
            let g = AnnotationGraph::of(r);
            for q in QUESTIONS.iter().copied().chain([extra.as_str()]) {
                let _ = answer_question(r, &g, q);
            }
        }
        let made = generate_r2vq(&doc, &R2vqGenConfig { distractor_rate: 1.0, ..R2vqGenConfig::default() });
        for q in &made.questions {
            let r = doc.recipes.iter().find(|r| r.id == q.recipe).unwrap();
            let a = answer_question(r, &AnnotationGraph::of(r), &q.question).unwrap();
            prop_assert_eq!(&a.answer, &q.answer, "{}", q.question);
        }
    }
}

#[test]
fn the_unmutated_recipe_reads_and_every_listed_question_parses() {
    let doc = parse_r2vq_conllu(Path::new("r.csv"), RECIPE).unwrap();
    let r = &doc.recipes[0];
    let g = AnnotationGraph::of(r);
    assert_eq!(g.events.len(), 2);
    let answered = QUESTIONS.iter().filter(|q| answer_question(r, &g, q).unwrap().answer.is_some()).count();
    assert!(answered >= 10, "{answered} of {} answered", QUESTIONS.len());
    assert!(!generate_r2vq(&doc, &R2vqGenConfig::default()).questions.is_empty());
}
