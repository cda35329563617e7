//! Simulated annotators that use the server through HTTP like a person: open the work page, answer, submit,
//! retry after a failure. Their answers come from the instance's gold order with noise (each adjacent pair
//! swapped with probability `noise`); which instance a page shows is looked up in the database by the form's
//! assignment id (the simulator's oracle: the page itself never names the instance).
//!
//! Used by `stepwise bench annotate` (load, kill -9) and the pilot study on real procedures.

use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::client::{Client, Reply, form_value, item_of, work_form};
use crate::db::{Db, task_spec};
use crate::judgements::{Answer, HELPED};
use crate::pages::percent_encode;
use crate::study::{Modality, Study, StudyKind};

/// How a simulated person answers.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// Probability of swapping each adjacent pair of the gold order (0 = always right).
    pub noise: f64,
    /// Alternative-order studies: probability of offering an alternative (a true second reference when the
    /// instance has one, else the gold order with one adjacent pair swapped: the instance's usual pair with
    /// probability 0.8, another one otherwise).
    pub alternative_rate: f64,
    /// A careless person orders at random (the censoring floor should catch them).
    pub careless: bool,
    pub confidence: Confidence,
}

/// How a simulated person rates their confidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    /// 3–5 when their order is right, 1–3 when it is wrong (load tests: plausible pages, not calibrated people).
    FromCorrectness,
    /// 1–5 uniformly, whatever they answered: agreement and accuracy tables must not depend on it.
    Independent,
}

/// What one step of a simulated person did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// An answer was submitted and acknowledged (303); `answer` is the JSON the server stores.
    Submitted { assignment: i64, answer: String, hit_done: bool, submit_seconds: f64 },
    /// The page said there is nothing more (all done, not qualified, censored).
    Finished(String),
}

/// Gold with each adjacent pair swapped with probability `noise` (one left-to-right pass).
pub fn noisy(gold: &[usize], noise: f64, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut o = gold.to_vec();
    for k in 1..o.len() {
        if rng.random_bool(noise.clamp(0.0, 1.0)) {
            o.swap(k - 1, k);
        }
    }
    o
}

/// The answer a simulated person gives to `instance` shown in `modality`.
pub fn answer_for(
    study: &Study,
    kind: StudyKind,
    instance: usize,
    modality: Modality,
    b: &Behaviour,
    rng: &mut ChaCha8Rng,
) -> Answer {
    let inst = &study.instances[instance];
    let gold = &inst.references[0];
    match kind {
        StudyKind::Ordering => {
            let order = if b.careless {
                let mut o = gold.clone();
                o.shuffle(rng);
                o
            } else {
                noisy(gold, b.noise, rng)
            };
            let confidence = match b.confidence {
                Confidence::FromCorrectness if &order == gold => rng.random_range(3..=5),
                Confidence::FromCorrectness => rng.random_range(1..=3),
                Confidence::Independent => rng.random_range(1..=5),
            };
            let helped =
                (modality == Modality::Multimodal).then(|| HELPED[rng.random_range(0..HELPED.len())].to_string());
            Answer { order: Some(order), confidence: Some(confidence), helped, alternatives: None }
        }
        StudyKind::Alternatives => {
            let mut alternatives = Vec::new();
            if rng.random_bool(b.alternative_rate.clamp(0.0, 1.0)) {
                let alt = if inst.references.len() > 1 {
                    inst.references[rng.random_range(1..inst.references.len())].clone()
                } else {
                    // People mostly agree on which two steps could trade places (one pair per instance), some
                    // pick another pair: the agreement filter and the vote have something to decide.
                    let mut o = gold.clone();
                    let shared = 1 + instance % (o.len() - 1);
                    let k = if rng.random_bool(0.8) { shared } else { rng.random_range(1..o.len()) };
                    o.swap(k - 1, k);
                    o
                };
                alternatives.push(alt);
            }
            Answer { order: None, confidence: None, helped: None, alternatives: Some(alternatives) }
        }
    }
}

/// The form a browser would post for `answer`.
pub fn form_of(csrf: &str, answer: &Answer) -> String {
    let mut f = format!("csrf={}", percent_encode(csrf));
    if let Some(o) = &answer.order {
        let s: Vec<String> = o.iter().map(usize::to_string).collect();
        f.push_str(&format!("&order={}", percent_encode(&s.join(","))));
    }
    if let Some(c) = answer.confidence {
        f.push_str(&format!("&confidence={c}"));
    }
    if let Some(h) = &answer.helped {
        f.push_str(&format!("&helped={h}"));
    }
    if let Some(a) = &answer.alternatives {
        f.push_str(&format!("&alternatives={}", percent_encode(&serde_json::to_string(a).unwrap_or_default())));
    }
    f
}

/// Open the work page and answer its item. I/O errors are returned for the caller to retry (a submission
/// retried after a lost reply is acknowledged again and stored once).
pub async fn step(
    client: &mut Client,
    db: &Db,
    study: &Study,
    b: &Behaviour,
    rng: &mut ChaCha8Rng,
) -> std::io::Result<Step> {
    let page = client.get("/work").await?;
    if page.status != 200 {
        return Err(std::io::Error::other(format!("GET /work answered {}", page.status)));
    }
    let Some(id) = work_form(&page.body) else {
        let title = page.body.split("<h1>").nth(1).and_then(|t| t.split("</h1>").next()).unwrap_or("").to_string();
        return Ok(Step::Finished(title));
    };
    let csrf = form_value(&page.body, "csrf").unwrap_or("").to_string();
    let a = db.assignment(id).await.map_err(|e| std::io::Error::other(e.to_string()))?;
    let (instance, modality, qualification) = a
        .and_then(|a| task_spec(study, a.task_id))
        .ok_or_else(|| std::io::Error::other(format!("assignment {id} is not in the database")))?;
    let kind = if qualification { StudyKind::Ordering } else { study.rules.kind };
    let answer = answer_for(study, kind, instance, modality, b, rng);
    let (k, n) = item_of(&page.body).unwrap_or((1, 1));
    let started = std::time::Instant::now();
    let reply = submit_with_retry(client, id, &form_of(&csrf, &answer)).await?;
    let submit_seconds = started.elapsed().as_secs_f64();
    if reply.status != 303 {
        return Err(std::io::Error::other(format!("POST /work/{id} answered {}: {}", reply.status, reply.body)));
    }
    Ok(Step::Submitted { assignment: id, answer: answer.to_json(), hit_done: k == n, submit_seconds })
}

/// Post a submission, retrying the same form after connection failures (at most 50 tries, 100 ms apart).
pub async fn submit_with_retry(client: &mut Client, id: i64, form: &str) -> std::io::Result<Reply> {
    let mut last = None;
    for _ in 0..50 {
        match client.post_form(&format!("/work/{id}"), form).await {
            Ok(r) if r.status == 503 => last = Some(std::io::Error::other("503")),
            Ok(r) => return Ok(r),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no reply")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn noise_zero_is_gold_and_forms_encode() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(noisy(&[3, 1, 2, 0], 0.0, &mut rng), vec![3, 1, 2, 0]);
        let o = noisy(&[3, 1, 2, 0], 1.0, &mut rng);
        let mut s = o.clone();
        s.sort();
        assert_eq!(s, vec![0, 1, 2, 3]);
        assert_ne!(o, vec![3, 1, 2, 0]);
        let a =
            Answer { order: Some(vec![1, 0]), confidence: Some(4), helped: Some("both".into()), alternatives: None };
        assert_eq!(form_of("c&1", &a), "csrf=c%261&order=1%2C0&confidence=4&helped=both");
    }
}
