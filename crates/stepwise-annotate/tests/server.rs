//! The whole server against a real database: SQLite here (a file in a temp folder), PostgreSQL in
//! `postgres_flow` when `STEPWISE_TEST_POSTGRES_URL` names a server (`.ci/run` starts one from Debian's
//! packages). Requests go through the real router (`tower::ServiceExt::oneshot`); the browser test
//! (`tests/browser/`) drives the same pages over TCP in Chromium.

use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use stepwise_annotate::db::{DISCARDED, DONE, Db};
use stepwise_annotate::export::{ExportOptions, export};
use stepwise_annotate::server::{AppState, router};
use stepwise_annotate::study::{Modality, Study, StudyKind, StudyRules};
use stepwise_core::sequencing::{SequencingInstance, SequencingItem};
use tower::ServiceExt;

fn instances(n: usize, items: usize) -> Vec<SequencingInstance> {
    (0..n)
        .map(|i| SequencingInstance {
            constraints: None,
            id: format!("inst-{i}"),
            procedure: format!("proc-{i}"),
            split: "test".into(),
            modality: "text".into(),
            items: (0..items)
                .map(|k| SequencingItem {
                    step: k,
                    title: None,
                    text: Some(format!("do thing {k} of {i}")),
                    images: vec![],
                })
                .collect(),
            // shuffled: item k is step (k + 1) mod items → gold lists items by step
            references: vec![(0..items).map(|s| (s + items - 1) % items).collect()],
        })
        .collect()
}

struct Client {
    app: axum::Router,
    cookie: String,
}

struct Reply {
    status: StatusCode,
    body: String,
    /// The body as sent (downloads are not text).
    bytes: Vec<u8>,
    content_type: Option<String>,
    location: Option<String>,
}

impl Client {
    async fn send(&mut self, method: &str, uri: &str, form: Option<&str>) -> Reply {
        self.send_as(method, uri, form.map(|f| ("application/x-www-form-urlencoded", f))).await
    }

    async fn send_as(&mut self, method: &str, uri: &str, content: Option<(&str, &str)>) -> Reply {
        let mut req = Request::builder().method(method).uri(uri).header(header::HOST, "annotate.test");
        if !self.cookie.is_empty() {
            req = req.header(header::COOKIE, &self.cookie);
        }
        let body = match content {
            Some((content_type, f)) => {
                req = req.header(header::CONTENT_TYPE, content_type);
                Body::from(f.to_string())
            }
            None => Body::empty(),
        };
        let resp = self.app.clone().oneshot(req.body(body).unwrap()).await.unwrap();
        let status = resp.status();
        let location = resp.headers().get(header::LOCATION).map(|v| v.to_str().unwrap().to_string());
        let content_type = resp.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_string());
        let cookies: Vec<String> =
            resp.headers().get_all(header::SET_COOKIE).iter().map(|v| v.to_str().unwrap().to_string()).collect();
        for c in &cookies {
            // The session cookie is Lax (invite links arrive from other sites), the sign-in cookie Strict.
            let same_site = if c.starts_with("sw_session=") { "SameSite=Lax" } else { "SameSite=Strict" };
            assert!(c.contains("HttpOnly") && c.contains(same_site), "{c}");
            let kv = c.split(';').next().unwrap();
            let name = kv.split('=').next().unwrap();
            let mut kept: Vec<String> = self
                .cookie
                .split("; ")
                .filter(|x| !x.is_empty() && !x.starts_with(&format!("{name}=")))
                .map(String::from)
                .collect();
            if !kv.ends_with('=') {
                kept.push(kv.to_string());
            }
            self.cookie = kept.join("; ");
        }
        let bytes = resp.into_body().collect().await.unwrap().to_bytes().to_vec();
        let body = String::from_utf8_lossy(&bytes).into_owned();
        Reply { status, body, bytes, content_type, location }
    }

    async fn get(&mut self, uri: &str) -> Reply {
        self.send("GET", uri, None).await
    }

    async fn post(&mut self, uri: &str, form: &str) -> Reply {
        self.send("POST", uri, Some(form)).await
    }
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)? + i;
    Some(&s[i..j])
}

fn csrf(html: &str) -> String {
    between(html, "name=\"csrf\" value=\"", "\"").unwrap_or_else(|| panic!("no csrf field in {html}")).to_string()
}

fn assignment(html: &str) -> i64 {
    between(html, "action=\"/work/", "\"").expect("a work form").parse().unwrap()
}

async fn gold(db: &Db, study: &Study, id: i64) -> Vec<usize> {
    let a = db.assignment(id).await.unwrap().unwrap();
    let (instance, _, _) = stepwise_annotate::db::task_spec(study, a.task_id).unwrap();
    study.instances[instance].references[0].clone()
}

fn join(order: &[usize]) -> String {
    order.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("%2C")
}

/// Answer the current item of `c`; `right` picks the gold order or its reverse.
async fn answer(c: &mut Client, db: &Db, study: &Study, right: bool) -> (i64, Reply) {
    let page = c.get("/work").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let id = assignment(&page.body);
    let mut order = gold(db, study, id).await;
    if !right {
        order.reverse();
    }
    let form = format!("csrf={}&order={}&confidence=4&helped=both", csrf(&page.body), join(&order));
    (id, c.post(&format!("/work/{id}"), &form).await)
}

async fn new_worker(app: &axum::Router, link: &str) -> Client {
    let mut c = Client { app: app.clone(), cookie: String::new() };
    let path = &link[link.find("/join/").unwrap()..];
    let r = c.get(path).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.location.as_deref(), Some("/work"));
    c
}

async fn flow(url: &str, dir: &Path) {
    let rules = StudyRules {
        kind: StudyKind::Ordering,
        modalities: vec![Modality::Multimodal, Modality::Text],
        hit_size: 3,
        judgements: 2,
        qualification_items: 1,
        qualification_threshold: 1.0,
        censor_floor: 0.5,
        censor_min_items: 2,
        ..StudyRules::default()
    };
    let (study, password) = Study::create(instances(7, 4), Path::new("inst.jsonl"), None, rules).unwrap();
    let db = Db::open(url).await.unwrap();
    db.sync_tasks(&study).await.unwrap();
    db.sync_tasks(&study).await.unwrap(); // idempotent on restart
    let state = AppState::new(db.clone(), study.clone());
    let app = router(state);

    // --- admin: sign-in with the double-submit cookie, dashboard, invites
    let mut admin = Client { app: app.clone(), cookie: String::new() };
    assert_eq!(admin.get("/admin").await.location.as_deref(), Some("/admin/login"));
    let form = admin.get("/admin/login").await;
    let token = csrf(&form.body);
    let r = admin.post("/admin/login", &format!("csrf={token}&password=wrong")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = admin.post("/admin/login", &format!("csrf=forged&password={password}")).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = admin.post("/admin/login", &format!("csrf={token}&password={password}")).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let dash = admin.get("/admin").await;
    assert!(dash.body.contains("Study dashboard") && dash.body.contains("No one yet"), "{}", dash.body);
    let admin_csrf = csrf(&dash.body);
    assert_eq!(admin.post("/admin/invites", "count=3").await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        admin.post("/admin/invites", &format!("csrf={admin_csrf}&count=0")).await.status,
        StatusCode::BAD_REQUEST
    );
    let made = admin.post("/admin/invites", &format!("csrf={admin_csrf}&count=3&label=lab")).await;
    assert_eq!(made.status, StatusCode::OK);
    let links: Vec<String> = made
        .body
        .match_indices("http://annotate.test/join/")
        .map(|(i, _)| made.body[i..].split('<').next().unwrap().to_string())
        .collect();
    assert_eq!(links.len(), 3, "{}", made.body);

    // --- annotator A: qualification (exactly right), then study HITs
    let mut a = new_worker(&app, &links[0]).await;
    let page = a.get("/work").await;
    assert!(page.body.contains("Qualification 1"), "{}", page.body);
    let id = assignment(&page.body);
    let good = join(&gold(&db, &study, id).await);
    let c = csrf(&page.body);
    for (form, status, says) in [
        (format!("order={good}&confidence=4&helped=both"), StatusCode::FORBIDDEN, "expired"),
        (format!("csrf={c}&order=0%2C0%2C1%2C2&confidence=4&helped=both"), StatusCode::BAD_REQUEST, "twice"),
        (format!("csrf={c}&order={good}&confidence=7&helped=both"), StatusCode::BAD_REQUEST, "1 to 5"),
        (format!("csrf={c}&order={good}&confidence=3"), StatusCode::BAD_REQUEST, "which modality helped"),
    ] {
        let r = a.post(&format!("/work/{id}"), &form).await;
        assert_eq!(r.status, status, "{form}: {}", r.body);
        assert!(r.body.contains(says), "{form}: {}", r.body);
    }
    let ok = format!("csrf={c}&order={good}&confidence=5&helped=text");
    assert_eq!(a.post(&format!("/work/{id}"), &ok).await.status, StatusCode::SEE_OTHER);
    // A retried submit is acknowledged again and counted once; a changed answer is refused.
    assert_eq!(a.post(&format!("/work/{id}"), &ok).await.status, StatusCode::SEE_OTHER);
    let changed = format!("csrf={c}&order={}&confidence=5&helped=text", join(&[0, 1, 2, 3]));
    assert_eq!(a.post(&format!("/work/{id}"), &changed).await.status, StatusCode::CONFLICT);
    let w = db.workers().await.unwrap();
    assert_eq!(w[0].status, "active");
    assert_eq!(w[0].qualification_score, Some(1.0));
    // Study HIT: up to 3 items of one modality, progress shown.
    let page = a.get("/work").await;
    assert!(page.body.contains("HIT 2 · item 1 of 3"), "{}", page.body);
    for _ in 0..3 {
        let (_, r) = answer(&mut a, &db, &study, true).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
    }
    // Annotators never reach admin routes.
    assert_eq!(a.get("/admin").await.location.as_deref(), Some("/admin/login"));
    assert_eq!(a.post("/admin/invites", &format!("csrf={c}&count=5")).await.status, StatusCode::FORBIDDEN);

    // --- annotator B fails the qualification
    let mut b = new_worker(&app, &links[1]).await;
    // B cannot answer A's items (with B's own valid form token).
    let b_csrf = csrf(&b.get("/work").await.body);
    let a_items = db.assignments(Some(w[0].id)).await.unwrap();
    let open_a = a_items.iter().find(|x| x.status == "open").map(|x| x.id).unwrap_or(a_items[0].id);
    let r = b.post(&format!("/work/{open_a}"), &format!("csrf={b_csrf}&order={good}&confidence=3")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let (_, r) = answer(&mut b, &db, &study, false).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let page = b.get("/work").await;
    assert!(page.body.contains("did not reach"), "{}", page.body);

    // --- annotator C qualifies, then orders wrongly twice: censored, items withdrawn and re-queued
    let mut cc = new_worker(&app, &links[2]).await;
    answer(&mut cc, &db, &study, true).await;
    for _ in 0..2 {
        let (_, r) = answer(&mut cc, &db, &study, false).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
    }
    let page = cc.get("/work").await;
    assert!(page.body.contains("accuracy floor"), "{}", page.body);
    let c_id = db.workers().await.unwrap()[2].id;
    let c_items = db.assignments(Some(c_id)).await.unwrap();
    let (quals, study_items): (Vec<_>, Vec<_>) = c_items.iter().partition(|x| x.hit_seq == 1);
    assert!(quals.iter().all(|x| x.status == DONE));
    assert!(!study_items.is_empty() && study_items.iter().all(|x| x.status == DISCARDED), "{study_items:?}");

    // --- hostile requests are 4xx and change nothing: another session's form token, a forged session, malformed,
    // oversized and mistyped bodies
    let page = a.get("/work").await;
    let open = assignment(&page.body);
    let before = db.assignments(None).await.unwrap();
    let right = join(&gold(&db, &study, open).await);
    let with_b_token = format!("csrf={b_csrf}&order={right}&confidence=4&helped=both");
    assert_eq!(a.post(&format!("/work/{open}"), &with_b_token).await.status, StatusCode::FORBIDDEN);
    let mut forged = Client { app: app.clone(), cookie: format!("sw_session={}", "ab".repeat(32)) };
    let own = format!("csrf={}&order={right}&confidence=4&helped=both", csrf(&page.body));
    assert_eq!(forged.post(&format!("/work/{open}"), &own).await.status, StatusCode::FORBIDDEN);
    assert_eq!(forged.get("/work").await.status, StatusCode::FORBIDDEN);
    let malformed = a.post(&format!("/work/{open}"), "csrf=%ZZ&order=%").await;
    assert!(malformed.status.is_client_error(), "{}", malformed.status);
    let json = a.send_as("POST", &format!("/work/{open}"), Some(("application/json", "{\"order\":[0]}"))).await;
    assert_eq!(json.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let big = format!("csrf={c}&order={}", "1".repeat(70 * 1024));
    assert_eq!(a.post(&format!("/work/{open}"), &big).await.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(db.assignments(None).await.unwrap(), before, "refused requests changed the database");
    assert_eq!(a.get("/nope").await.status, StatusCode::NOT_FOUND);
    assert_eq!(a.post("/work/notanumber", &ok).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.get("/join/zz").await.status, StatusCode::NOT_FOUND);
    assert_eq!(a.get("/img/..%2F..%2Fetc%2Fpasswd").await.status, StatusCode::NOT_FOUND);

    // --- A finishes everything left for them; then "all done"
    for _ in 0..20 {
        let page = a.get("/work").await;
        if page.body.contains("All done") {
            break;
        }
        let (_, r) = answer(&mut a, &db, &study, true).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER);
    }
    assert!(a.get("/work").await.body.contains("All done"));
    // A saw each of the 6 study instances in one modality only (modality gap: never).
    let mine = db.assignments(Some(w[0].id)).await.unwrap();
    let study_done: Vec<_> = mine.iter().filter(|x| x.hit_seq > 1 && x.status == DONE).collect();
    assert_eq!(study_done.len(), 6);

    // --- dashboard and export agree with the database
    let dash = admin.get("/admin").await;
    assert!(dash.body.contains("censored") && dash.body.contains("failed"), "{}", dash.body);
    let workers = db.workers().await.unwrap();
    let all = db.assignments(None).await.unwrap();
    let out = dir.join("export");
    std::fs::create_dir_all(&out).unwrap();
    let ex = export(&study, &workers, &all, &out, &ExportOptions::default()).unwrap();
    assert_eq!(ex.judgements, all.iter().filter(|x| x.answer.is_some()).count());
    let rows: usize = ["multimodal", "text"]
        .iter()
        .filter_map(|m| std::fs::read_to_string(out.join(format!("predictions/{m}-1.jsonl"))).ok())
        .map(|t| t.lines().count())
        .sum();
    assert_eq!(rows, 6, "A's six counted study judgements are the first round");
    let preds = stepwise_score::predictions::read_order_predictions(&out.join(
        if out.join("predictions/text-1.jsonl").exists() {
            "predictions/text-1.jsonl"
        } else {
            "predictions/multimodal-1.jsonl"
        },
    ))
    .unwrap();
    for p in &preds {
        let inst = study.instances.iter().find(|i| i.id == p.id).unwrap();
        assert_eq!(p.order, inst.references[0], "A ordered every study item right");
    }
    assert!(ex.summary.contains("| lab-1 | active | 100.0% |"), "{}", ex.summary);

    // The dashboard's download is the same export, file for file; only the admin gets it.
    let mut stranger = Client { app: admin.app.clone(), cookie: String::new() };
    assert_eq!(stranger.get("/admin/export.zip").await.location.as_deref(), Some("/admin/login"));
    assert!(dash.body.contains("href=\"/admin/export.zip\""), "{}", dash.body);
    let zip = admin.get("/admin/export.zip").await;
    assert_eq!(zip.status, StatusCode::OK);
    assert_eq!(zip.content_type.as_deref(), Some("application/zip"));
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip.bytes.clone())).unwrap();
    let expected = stepwise_core::output::read_tree(&out).unwrap();
    assert_eq!(archive.len(), expected.len());
    for (name, bytes) in &expected {
        let mut f = archive.by_name(&format!("{}/{name}", stepwise_annotate::export::ZIP_FOLDER)).unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut got).unwrap();
        assert!(&got == bytes, "{name} differs between the download and the export");
    }
    assert_eq!(admin.get("/admin/export.zip").await.bytes, zip.bytes, "the same judgements give the same zip");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_flow() {
    let td = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", td.path().join("a.sqlite").display());
    flow(&url, td.path()).await;
    // WAL and synchronous writes are on for every connection.
    let db = Db::open(&url).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&db.pool).await.unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: STEPWISE_TEST_POSTGRES_URL (set by .ci/run)"]
async fn postgres_flow() {
    let url = std::env::var("STEPWISE_TEST_POSTGRES_URL").expect("STEPWISE_TEST_POSTGRES_URL");
    let url = fresh_postgres(&url, "stepwise_test_flow").await;
    let td = tempfile::tempdir().unwrap();
    flow(&url, td.path()).await;
}

#[tokio::test]
async fn a_database_of_another_study_is_refused() {
    let td = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", td.path().join("a.sqlite").display());
    let rules = StudyRules { modalities: vec![Modality::Text], ..StudyRules::default() };
    let (s1, _) = Study::create(instances(3, 3), Path::new("x"), None, rules.clone()).unwrap();
    let (s2, _) = Study::create(instances(4, 3), Path::new("x"), None, rules).unwrap();
    let db = Db::open(&url).await.unwrap();
    db.sync_tasks(&s1).await.unwrap();
    let e = db.sync_tasks(&s2).await.unwrap_err().to_string();
    assert!(e.contains("another study"), "{e}");
    let e = Db::open("mysql://x").await.unwrap_err().to_string();
    assert!(e.contains("expected sqlite://"), "{e}");
}

/// An item held past the timeout is offered to someone else; once they answer it, the first holder's copy is
/// withdrawn (no judgement too many): their page moves on and a late submit is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_items_are_reoffered_and_never_over_judged() {
    let td = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", td.path().join("a.sqlite").display());
    let rules = StudyRules {
        modalities: vec![Modality::Text],
        hit_size: 1,
        judgements: 1,
        assignment_timeout_minutes: 1,
        ..StudyRules::default()
    };
    let (study, _) = Study::create(instances(2, 3), Path::new("x"), None, rules).unwrap();
    let db = Db::open(&url).await.unwrap();
    db.sync_tasks(&study).await.unwrap();
    let app = router(AppState::new(db.clone(), study.clone()));
    let x = db.create_worker("x", "active", 0).await.unwrap();
    let y = db.create_worker("y", "active", 0).await.unwrap();
    let mut cx = new_worker(&app, &format!("/join/{}", x.invite)).await;
    let mut cy = new_worker(&app, &format!("/join/{}", y.invite)).await;
    let page = cx.get("/work").await;
    let held = assignment(&page.body);
    let late = format!("csrf={}&order={}&confidence=3", csrf(&page.body), join(&gold(&db, &study, held).await));
    // X leaves the item open for two minutes.
    sqlx::query("UPDATE assignments SET created_ms = created_ms - 120000 WHERE id = $1")
        .bind(held)
        .execute(&db.pool)
        .await
        .unwrap();
    let task = db.assignment(held).await.unwrap().unwrap().task_id;
    // Y is offered the same item (queue order) and answers it.
    let (answered, r) = answer(&mut cy, &db, &study, true).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(db.assignment(answered).await.unwrap().unwrap().task_id, task);
    // X's late submit is refused and changes nothing; X's page moves on to the other item.
    let r = cx.post(&format!("/work/{held}"), &late).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(stepwise_annotate::db::done_count(&db.pool, task).await.unwrap(), 1);
    assert_eq!(db.assignment(held).await.unwrap().unwrap().status, DISCARDED);
    let next = cx.get("/work").await;
    assert_ne!(assignment(&next.body), held);
}

/// The queue kept in the database hands out exactly the HITs the pure rules (`schedule::next_hit`) choose from
/// the assignments, through timeouts, late answers, withdrawals and censoring; and its counts always equal a
/// recount of the assignments right after a HIT is handed out.
async fn queue_follows_rules(url: &str) {
    use rand::{Rng, SeedableRng};
    use stepwise_annotate::schedule::{Seen, next_hit};

    let rules = StudyRules {
        modalities: vec![Modality::Multimodal, Modality::Text],
        hit_size: 3,
        judgements: 2,
        modality_gap: Some(2),
        censor_floor: 0.4,
        censor_min_items: 4,
        assignment_timeout_minutes: 1,
        ..StudyRules::default()
    };
    let (study, _) = Study::create(instances(40, 3), Path::new("x"), None, rules).unwrap();
    let db = Db::open(url).await.unwrap();
    db.sync_tasks(&study).await.unwrap();
    let app = router(AppState::new(db.clone(), study.clone()));
    let mut people = Vec::new();
    for k in 0..5 {
        let w = db.create_worker(&format!("p{k}"), "active", 0).await.unwrap();
        let c = new_worker(&app, &format!("/join/{}", w.invite)).await;
        people.push((w.id, c));
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let (mut handed, mut empty) = (0, 0);
    for _ in 0..500 {
        let k = rng.random_range(0..people.len());
        let (worker, c) = &mut people[k];
        let status = db.worker(*worker).await.unwrap().unwrap().status;
        let mine = db.assignments(Some(*worker)).await.unwrap();
        let has_open = mine.iter().any(|a| a.status == "open");
        let now = stepwise_annotate::server::now_ms();
        let expected = if !has_open && status == "active" {
            let load = db.task_load(now - 60_000).await.unwrap();
            let seen: Vec<Seen> = mine
                .iter()
                .map(|a| {
                    let (instance, modality, _) = stepwise_annotate::db::task_spec(&study, a.task_id).unwrap();
                    Seen { instance, modality, hit_seq: a.hit_seq }
                })
                .collect();
            let next_seq = mine.iter().map(|a| a.hit_seq).max().unwrap_or(0) + 1;
            Some(next_hit(&study, &load, &seen, next_seq))
        } else {
            None
        };
        let page = c.get("/work").await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        if let Some(expected) = expected {
            let after = db.assignments(Some(*worker)).await.unwrap();
            let last = after.iter().map(|a| a.hit_seq).max().unwrap_or(0);
            let got: Vec<i64> =
                after.iter().filter(|a| a.hit_seq == last && a.status == "open").map(|a| a.task_id).collect();
            if expected.is_empty() {
                assert!(page.body.contains("All done"), "{}", page.body);
                empty += 1;
            } else {
                assert_eq!(got, expected, "the HIT handed out");
                handed += 1;
            }
            // Right after a HIT is handed out (expiry just ran), the counts equal a recount.
            let load = db.task_load(now - 60_000).await.unwrap();
            let held: Vec<(i64, i64)> =
                sqlx::query_as("SELECT id, held FROM tasks WHERE qualification = 0 ORDER BY id")
                    .fetch_all(&db.pool)
                    .await
                    .unwrap();
            for (id, h) in &held {
                assert_eq!(*h as usize, load.get(id).copied().unwrap_or(0), "held of task {id}");
            }
            let wanted: Vec<(String, i64)> = sqlx::query_as("SELECT modality, remaining FROM wanted ORDER BY modality")
                .fetch_all(&db.pool)
                .await
                .unwrap();
            for (m, r) in wanted {
                let want: i64 = held
                    .iter()
                    .filter(|(id, _)| study.tasks[*id as usize - 1].modality.as_str() == m)
                    .map(|(_, h)| (2 - h).max(0))
                    .sum();
                assert_eq!(r, want, "wanted {m}");
            }
        }
        if !page.body.contains("action=\"/work/") {
            continue;
        }
        match rng.random_range(0..10) {
            // Walk away from the open items (they time out).
            0..=1 => {
                sqlx::query(
                    "UPDATE assignments SET created_ms = created_ms - 120000 WHERE worker_id = $1 AND status = 'open'",
                )
                .bind(*worker)
                .execute(&db.pool)
                .await
                .unwrap();
            }
            // Answer, mostly right (wrong answers censor some people).
            _ => {
                let (_, r) = answer(c, &db, &study, rng.random_bool(0.7)).await;
                assert!(r.status == StatusCode::SEE_OTHER || r.status == StatusCode::CONFLICT, "{}", r.body);
            }
        }
    }
    assert!(handed > 40 && empty > 0, "{handed} HITs handed out, {empty} empty");
    let censored = db.workers().await.unwrap().iter().filter(|w| w.status == "censored").count();
    let withdrawn = db.assignments(None).await.unwrap().iter().filter(|a| a.status == DISCARDED).count();
    assert!(censored > 0 && withdrawn > 0, "{censored} censored, {withdrawn} withdrawn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_queue_follows_the_rules() {
    let td = tempfile::tempdir().unwrap();
    queue_follows_rules(&format!("sqlite://{}?mode=rwc", td.path().join("a.sqlite").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: STEPWISE_TEST_POSTGRES_URL (set by .ci/run)"]
async fn postgres_queue_follows_the_rules() {
    let url = std::env::var("STEPWISE_TEST_POSTGRES_URL").expect("STEPWISE_TEST_POSTGRES_URL");
    queue_follows_rules(&fresh_postgres(&url, "stepwise_test_queue").await).await;
}

/// A new empty database for one test on the PostgreSQL server `url` names (tests run in parallel); its URL.
async fn fresh_postgres(url: &str, name: &str) -> String {
    sqlx::any::install_default_drivers();
    let admin = sqlx::AnyPool::connect(url).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.unwrap();
    admin.close().await;
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let server = &base[..base.rfind('/').unwrap()];
    if query.is_empty() { format!("{server}/{name}") } else { format!("{server}/{name}?{query}") }
}

/// Behind a TLS proxy the admin trusts, a request the proxy marks `X-Forwarded-Proto: https` gets `Secure`
/// cookies and HSTS; the same header from any other peer changes nothing. (Direct TLS: the browser test.)
#[tokio::test]
async fn a_trusted_proxy_makes_cookies_secure() {
    use axum::extract::ConnectInfo;
    use stepwise_annotate::tls::{Peer, Transport};

    let td = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", td.path().join("a.sqlite").display());
    let rules = StudyRules { modalities: vec![Modality::Text], ..StudyRules::default() };
    let (study, _) = Study::create(instances(2, 3), Path::new("x"), None, rules).unwrap();
    let db = Db::open(&url).await.unwrap();
    db.sync_tasks(&study).await.unwrap();
    let proxy: std::net::SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let app = router(AppState::serving(db, study, Transport { tls: false, trusted_proxies: vec![proxy.ip()] }));
    let get = |peer: std::net::SocketAddr, proto: Option<&str>| {
        let mut req = Request::builder().uri("/admin/login").header(header::HOST, "annotate.test");
        if let Some(p) = proto {
            req = req.header("x-forwarded-proto", p);
        }
        let mut req = req.body(Body::empty()).unwrap();
        req.extensions_mut().insert(ConnectInfo(Peer(peer)));
        app.clone().oneshot(req)
    };
    let r = get(proxy, Some("https")).await.unwrap();
    let cookie = r.headers().get(header::SET_COOKIE).unwrap().to_str().unwrap();
    assert!(cookie.ends_with("; Secure") && cookie.contains("HttpOnly"), "{cookie}");
    assert_eq!(r.headers().get(header::STRICT_TRANSPORT_SECURITY).unwrap(), "max-age=31536000");
    for (peer, proto) in [(proxy, Some("http")), (proxy, None), ("10.1.2.3:40000".parse().unwrap(), Some("https"))] {
        let r = get(peer, proto).await.unwrap();
        let cookie = r.headers().get(header::SET_COOKIE).unwrap().to_str().unwrap();
        assert!(!cookie.contains("Secure"), "{peer} {proto:?}: {cookie}");
        assert!(r.headers().get(header::STRICT_TRANSPORT_SECURITY).is_none());
    }
}

/// Simulated people who order with adjacent-swap noise and rate their confidence independently of their
/// answers, working a study through the real server over TCP: the export's order agreement κ equals the κ
/// the noise model implies (exact, by enumerating every swap pattern) within its 95% bootstrap interval over
/// instances, and confidence tells nothing about correctness (mean confidence of right and of wrong orders
/// both within their intervals of 3, the uniform mean).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_confidence_gives_the_expected_agreement() {
    use rand::SeedableRng;
    use stepwise_annotate::client::Client;
    use stepwise_annotate::judgements::Answer;
    use stepwise_annotate::simulate::{Behaviour, Confidence, Step, noisy, step};
    use stepwise_score::agreement::{instance_order_kappa, order_kappa};
    use stepwise_score::bootstrap::{BootstrapConfig, Unit, mean_estimate};

    const NOISE: f64 = 0.2;
    const ITEMS: usize = 5;
    let td = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", td.path().join("a.sqlite").display());
    let rules = StudyRules {
        modalities: vec![Modality::Text],
        hit_size: 5,
        judgements: 4,
        censor_floor: 0.0,
        ..StudyRules::default()
    };
    let (study, _) = Study::create(instances(80, ITEMS), Path::new("x"), None, rules).unwrap();
    let db = Db::open(&url).await.unwrap();
    db.sync_tasks(&study).await.unwrap();
    let (ready, addr) = tokio::sync::oneshot::channel();
    let state = AppState::new(db.clone(), study.clone());
    tokio::spawn(stepwise_annotate::server::serve(state, "127.0.0.1:0".parse().unwrap(), None, move |a| {
        let _ = ready.send(a);
    }));
    let addr = addr.await.unwrap();

    // Eight people, one step each in turn (one task: the run is the same every time).
    let behaviour =
        Behaviour { noise: NOISE, alternative_rate: 0.0, careless: false, confidence: Confidence::Independent };
    let mut people = Vec::new();
    for k in 0..8u64 {
        let w = db.create_worker(&format!("sim-{k}"), "active", 0).await.unwrap();
        let mut c = Client::new(addr);
        assert_eq!(c.get(&format!("/join/{}", w.invite)).await.unwrap().status, 303);
        people.push((c, rand_chacha::ChaCha8Rng::seed_from_u64(k), false));
    }
    while people.iter().any(|p| !p.2) {
        for (c, rng, finished) in people.iter_mut().filter(|p| !p.2) {
            if let Step::Finished(_) = step(c, &db, &study, &behaviour, rng).await.unwrap() {
                *finished = true;
            }
        }
    }

    // κ the noise model implies: E over two independent noisy copies of one gold order.
    let gold: Vec<usize> = (0..ITEMS).collect();
    let patterns: Vec<(Vec<usize>, f64)> = (0..1u32 << (ITEMS - 1))
        .map(|bits| {
            let mut o = gold.clone();
            let mut p = 1.0;
            for k in 1..ITEMS {
                let swap = bits >> (k - 1) & 1 == 1;
                if swap {
                    o.swap(k - 1, k);
                }
                p *= if swap { NOISE } else { 1.0 - NOISE };
            }
            (o, p)
        })
        .collect();
    let expected: f64 = patterns
        .iter()
        .flat_map(|(a, pa)| patterns.iter().map(move |(b, pb)| pa * pb * order_kappa(a, b).unwrap()))
        .sum();
    // The simulator's noise is the model's (same patterns, same probabilities).
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(99);
    let exact = (0..20_000).filter(|_| noisy(&gold, NOISE, &mut rng) == gold).count() as f64 / 20_000.0;
    assert!((exact - (1.0 - NOISE).powi(ITEMS as i32 - 1)).abs() < 0.01, "{exact}");

    let assignments = db.assignments(None).await.unwrap();
    let mut by_instance: std::collections::BTreeMap<usize, Vec<Vec<usize>>> = Default::default();
    let (mut right, mut wrong) = (Vec::new(), Vec::new());
    for a in assignments.iter().filter(|a| a.status == DONE) {
        let (instance, _, _) = stepwise_annotate::db::task_spec(&study, a.task_id).unwrap();
        let answer: Answer = serde_json::from_str(a.answer.as_deref().unwrap()).unwrap();
        let order = answer.order.unwrap();
        let conf = f64::from(answer.confidence.unwrap());
        if study.is_reference(instance, &order) {
            right.push(conf)
        } else {
            wrong.push(conf)
        }
        by_instance.entry(instance).or_default().push(order);
    }
    assert_eq!(by_instance.len(), 80);
    assert!(by_instance.values().all(|o| o.len() == 4), "every instance judged 4 times");
    let kappas: Vec<f64> = by_instance
        .values()
        .map(|orders| instance_order_kappa(&orders.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap())
        .collect();
    let config = BootstrapConfig { resamples: 2000, confidence: 0.95, seed: 1 };
    let k = mean_estimate(&kappas, Unit::Rows, &config, "kappa");
    let ci = k.ci.unwrap();
    eprintln!(
        "κ {:.3} [{:.3}, {:.3}] over {} instances; the noise model's κ {expected:.3}",
        k.value,
        ci.low,
        ci.high,
        kappas.len()
    );
    assert!(
        ci.low <= expected && expected <= ci.high,
        "κ {:.3} [{:.3}, {:.3}], expected {expected:.3}",
        k.value,
        ci.low,
        ci.high
    );

    // The export's table says the same κ.
    let workers = db.workers().await.unwrap();
    let out = td.path().join("export");
    std::fs::create_dir_all(&out).unwrap();
    stepwise_annotate::export::export(&study, &workers, &assignments, &out, &ExportOptions { min_agreement: 0.4 })
        .unwrap();
    let tables: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tables.json")).unwrap()).unwrap();
    let table_kappa = tables["modalities"][0]["kappa"].as_f64().unwrap();
    assert!((table_kappa - k.value).abs() < 1e-12, "{table_kappa} vs {}", k.value);

    for (name, conf) in [("right", &right), ("wrong", &wrong)] {
        assert!(conf.len() > 50, "{name}: {} orders", conf.len());
        let e = mean_estimate(conf, Unit::Rows, &config, name);
        let ci = e.ci.unwrap();
        eprintln!("{name} orders: {} with mean confidence {:.2} [{:.2}, {:.2}]", conf.len(), e.value, ci.low, ci.high);
        assert!(
            ci.low <= 3.0 && 3.0 <= ci.high,
            "{name} orders: mean confidence {:.2} [{:.2}, {:.2}]",
            e.value,
            ci.low,
            ci.high
        );
    }
}
