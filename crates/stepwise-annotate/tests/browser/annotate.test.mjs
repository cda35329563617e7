// End-to-end test of `stepwise annotate` in a real browser (Debian's Chromium via playwright-core):
// an ordering study (admin sign-in, invite links, qualification passed and failed, drag and drop AND keyboard
// ordering, the two follow-up questions, images actually loaded, progress, "all done"), an alternative-orders
// study (orders added with the keyboard), the exports scored by `stepwise eval`, and a study with a censoring
// floor: a careless person (steps dragged by touch and by mouse into wrong orders, a drag cancelled with Escape)
// is stopped, the dashboard shows it, their items go to the next person, and the dashboard's export download
// equals `stepwise annotate export`.
//
//   STEPWISE=target/debug/stepwise node annotate.test.mjs        (CHROMIUM defaults to /usr/bin/chromium)
//
// Screenshots of the main pages go to $SCREENSHOTS (default: target/browser-screenshots under the current folder).
import { chromium } from "playwright-core";
import { readFileSync, existsSync, mkdirSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import assert from "node:assert/strict";
import { SHOTS, scratch, submitAndWait } from "./common.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const { work, sw, serve, instancesOf, run } = scratch("stepwise-browser-");
const shot = (page, name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

/** The instance a work page shows: the items' texts, in the order shown, equal the instance's items. */
async function shownInstance(page, instances) {
  const texts = await page.$$eval("#steps li.step .text", (els) => els.map((e) => e.textContent));
  const inst = instances.find((i) => i.items.length === texts.length && i.items.every((it, k) => it.text === texts[k]));
  assert.ok(inst, `no instance shows ${JSON.stringify(texts)}`);
  return inst;
}

async function order(page) {
  return page.$$eval("#steps li.step", (els) => els.map((e) => Number(e.dataset.item)));
}

/** Arrange the list to `target` (item indices): the first move by mouse drag and drop, the rest by keyboard. */
async function arrange(page, target) {
  let usedDrag = false;
  for (let pos = 0; pos < target.length; pos++) {
    let cur = await order(page);
    const from = cur.indexOf(target[pos]);
    if (from === pos) continue;
    const li = page.locator(`#steps li.step[data-item="${target[pos]}"]`);
    if (!usedDrag) {
      const dest = page.locator("#steps li.step").nth(pos);
      await li.dragTo(dest, { targetPosition: { x: 30, y: 5 } });
      usedDrag = true;
      cur = await order(page);
      assert.equal(cur.indexOf(target[pos]), pos, `drag and drop moved item ${target[pos]} to ${pos}: ${cur}`);
      continue;
    }
    await li.focus();
    for (let k = from; k > pos; k--) await page.keyboard.press("Alt+ArrowUp");
  }
  assert.deepEqual(await order(page), target);
  return usedDrag;
}

/** Sign the admin page in to the study served at `base`; returns `count` new invite links. */
async function signInAndInvite(admin, base, study, count) {
  await admin.goto(`${base}/admin/login`);
  await admin.fill("input[name=password]", readFileSync(join(work, study, "admin-password.txt"), "utf8").trim());
  await admin.click("button[type=submit]");
  await admin.waitForSelector("#invite-form");
  await admin.fill("#invite-form input[name=count]", String(count));
  await admin.click("#invite-form button[type=submit]");
  return admin.$$eval("code.invite", (els) => els.map((e) => e.textContent));
}

/** A finger drags step `item` by its handle until it sits above the step now at `pos` (CDP touch events: the
 *  page sees pointer events of type touch, as on a tablet). */
async function touchDrag(page, item, pos) {
  const cdp = await page.context().newCDPSession(page);
  const handle = page.locator(`#steps li.step[data-item="${item}"] .handle`);
  await handle.scrollIntoViewIfNeeded();
  const a = await handle.boundingBox();
  const b = await page.locator("#steps li.step").nth(pos).boundingBox();
  const x = a.x + a.width / 2;
  const y0 = a.y + a.height / 2;
  const y1 = b.y + 3;
  await cdp.send("Input.dispatchTouchEvent", { type: "touchStart", touchPoints: [{ x, y: y0 }] });
  for (let k = 1; k <= 8; k++) {
    await cdp.send("Input.dispatchTouchEvent", { type: "touchMove", touchPoints: [{ x, y: y0 + ((y1 - y0) * k) / 8 }] });
  }
  await cdp.send("Input.dispatchTouchEvent", { type: "touchEnd", touchPoints: [] });
  await cdp.detach();
}

/** An order of the instance's items that is none of its references (the first reference reversed, or a
 *  rotation of it). */
function wrongOrder(inst) {
  const isRef = (o) => inst.references.some((r) => r.join(",") === o.join(","));
  const base = inst.references[0];
  for (const cand of [[...base].reverse(), ...base.map((_, k) => [...base.slice(k), ...base.slice(0, k)])]) {
    if (!isRef(cand)) return cand;
  }
  throw new Error(`every order of ${inst.id} is a reference`);
}

async function main() {
  sw("world", "generate", "-n", "16", "--image-size", "96", "-o", "world");
  sw("generate", "world", "--task", "sequencing", "--modality", "multimodal", "--seq-steps", "4", "--seq-min-steps", "4", "-o", "seq");
  sw("annotate", "create", "seq", "-o", "study", "--modalities", "multimodal,text", "--judgements", "1",
    "--hit-size", "2", "--qualification", "1", "--qualification-threshold", "1");
  const base = await serve("study");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    // --- admin signs in and makes two invite links
    const admin = await (await browser.newContext()).newPage();
    await admin.goto(`${base}/admin`);
    assert.match(admin.url(), /\/admin\/login$/);
    await admin.fill("input[name=password]", "wrong");
    await admin.click("button[type=submit]");
    assert.match(await admin.textContent("body"), /Wrong password/);
    await admin.goto(`${base}/admin/login`);
    await admin.fill("input[name=password]", readFileSync(join(work, "study", "admin-password.txt"), "utf8").trim());
    await admin.click("button[type=submit]");
    await admin.waitForSelector("#invite-form");
    await admin.fill("#invite-form input[name=count]", "2");
    await admin.click("#invite-form button[type=submit]");
    const links = await admin.$$eval("code.invite", (els) => els.map((e) => e.textContent));
    assert.equal(links.length, 2);
    const cookies = await admin.context().cookies();
    assert.ok(cookies.every((c) => c.httpOnly && c.sameSite === (c.name === "sw_session" ? "Lax" : "Strict")), JSON.stringify(cookies));

    // --- an annotator: qualification, then every study item (drag and drop + keyboard)
    const instances = instancesOf("study");
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 2400 } })).newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    await page.goto(links[0]);
    assert.match(await page.textContent("#progress"), /Qualification 1 · item 1 of 1/);
    let drags = 0;
    let answered = 0;
    const seen = new Set();
    for (let guard = 0; guard < 100; guard++) {
      if (await page.locator("#answer").count() === 0) break;
      const inst = await shownInstance(page, instances);
      const multimodal = (await page.locator("input[name=helped]").count()) > 0;
      if (multimodal) {
        // Step photos are served and decoded.
        await page.waitForFunction(() => {
          const imgs = Array.from(document.querySelectorAll("#steps img"));
          return imgs.length > 0 && imgs.every((i) => i.complete && i.naturalWidth > 0);
        }, null, { timeout: 10000 });
        if (!seen.has("shot")) {
          seen.add("shot");
          await shot(page, "ordering-multimodal");
        }
        await page.check("input[name=helped][value=both]");
      } else {
        assert.equal(await page.locator("#steps img").count(), 0, "text items show no photo");
      }
      seen.add(`${inst.id}/${multimodal}`);
      if (await arrange(page, inst.references[0])) drags++;
      assert.equal(await page.inputValue("#order"), inst.references[0].join(","));
      await page.check("input[name=confidence][value='4']");
      await submitAndWait(page);
      answered++;
    }
    assert.match(await page.textContent("h1"), /All done/);
    assert.ok(drags > 0, "at least one item was ordered by drag and drop");
    // 1 qualification item + (16 − 1 instances) × 2 modalities, each once: the queue never repeats an instance
    // for one person, so this person gets each study instance in one modality only.
    assert.equal(answered, 1 + 15, `answered ${answered}`);
    assert.deepEqual(errors, []);

    // --- an invite link clicked on another site (a mail, a chat) still signs the person in
    const elsewhere = await (await browser.newContext()).newPage();
    await elsewhere.setContent(`<a id="go" href="${links[1]}">your study</a>`);
    await elsewhere.click("#go");
    await elsewhere.waitForSelector("#answer");
    assert.match(await elsewhere.textContent("#progress"), /Qualification 1/);
    // ... and this person orders the qualification item wrongly: below the threshold, no study items for them.
    const qual = await shownInstance(elsewhere, instances);
    await arrange(elsewhere, wrongOrder(qual));
    await elsewhere.check("input[name=confidence][value='3']");
    if (await elsewhere.locator("input[name=helped]").count()) await elsewhere.check("input[name=helped][value=text]");
    await submitAndWait(elsewhere);
    assert.match(await elsewhere.textContent("body"), /did not reach the study's threshold/);
    await shot(elsewhere, "not-qualified");

    // --- the dashboard shows the progress
    await admin.goto(`${base}/admin`);
    const progress = await admin.textContent("#progress-table");
    assert.match(progress, /multimodal/);
    assert.match(await admin.textContent("#workers"), /annotator-1\s*active\s*100\.0%\s*15\s*100\.0%/);
    assert.match(await admin.textContent("#workers"), /annotator-2\s*failed\s*0\.0%\s*0\s*–/);
    await shot(admin, "dashboard");

    // --- export and score the human orders with stepwise eval
    sw("annotate", "export", "study", "-o", "results");
    for (const m of ["multimodal", "text"]) {
      const f = join(work, "results", "predictions", `${m}-1.jsonl`);
      if (!existsSync(f)) continue;
      const report = sw("eval", "study/instances.jsonl", "-p", `results/predictions/${m}-1.jsonl`, "--skip-missing");
      assert.match(report, /PMR/, report);
    }

    // --- an alternative-orders study: one alternative added with the keyboard
    sw("annotate", "create", "seq", "-o", "alt", "--kind", "alternatives", "--judgements", "1", "--hit-size", "1",
      "--censor-floor", "0");
    const altBase = await serve("alt");
    await admin.goto(`${altBase}/admin/login`);
    await admin.fill("input[name=password]", readFileSync(join(work, "alt", "admin-password.txt"), "utf8").trim());
    await admin.click("button[type=submit]");
    await admin.waitForSelector("#invite-form");
    await admin.click("#invite-form button[type=submit]");
    const altLink = (await admin.$$eval("code.invite", (els) => els.map((e) => e.textContent)))[0];
    const alt = await (await browser.newContext()).newPage();
    alt.on("pageerror", (e) => errors.push(String(e)));
    await alt.goto(altLink);
    const altInstances = instancesOf("alt");
    const texts = await alt.$$eval("#steps li.step .text", (els) => els.map((e) => e.textContent));
    const inst = altInstances.find((i) => i.references[0].every((item, k) => i.items[item].text === texts[k]));
    assert.ok(inst, "the authored order is shown");
    await alt.click("#add-order");
    assert.match(await alt.textContent("#alt-error"), /original order/);
    // Swap the last two steps with the keyboard, add it, try adding it twice.
    const last = inst.references[0][inst.references[0].length - 1];
    await alt.locator(`#steps li.step[data-item="${last}"]`).focus();
    await alt.keyboard.press("Alt+ArrowUp");
    await alt.click("#add-order");
    await alt.click("#add-order");
    assert.match(await alt.textContent("#alt-error"), /already added/);
    assert.equal(await alt.textContent("#alt-count"), "1");
    const expected = [...inst.references[0]];
    [expected[expected.length - 2], expected[expected.length - 1]] = [expected[expected.length - 1], expected[expected.length - 2]];
    assert.deepEqual(JSON.parse(await alt.inputValue("#alternatives")), [expected]);
    await shot(alt, "alternatives");
    await submitAndWait(alt);
    assert.deepEqual(errors, []);
    sw("annotate", "export", "alt", "-o", "alt-results");
    const refs = readFileSync(join(work, "alt-results", "references.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const mine = refs.find((r) => r.id === inst.procedure);
    assert.deepEqual(mine.orders, [expected.map((item) => inst.items[item].step)]);
    // The references feed generation as multiple references.
    sw("generate", "world", "--task", "sequencing", "--modality", "multimodal", "--seq-steps", "4", "--seq-min-steps", "4",
      "--alt-orders", "alt-results/references.jsonl", "-o", "seq-alt");

    // --- censoring: a careless person is stopped at the floor, the dashboard says so, their items are re-queued
    sw("annotate", "create", "seq", "-o", "careless", "--modalities", "text", "--judgements", "1", "--hit-size", "2",
      "--censor-floor", "0.5", "--censor-min-items", "2");
    const cBase = await serve("careless");
    const [carelessLink, diligentLink] = await signInAndInvite(admin, cBase, "careless", 2);
    const cInstances = instancesOf("careless");
    const careless = await (await browser.newContext({ hasTouch: true, viewport: { width: 900, height: 1400 } })).newPage();
    careless.on("pageerror", (e) => errors.push(String(e)));
    await careless.goto(carelessLink);
    const carelessItems = [];
    for (let k = 0; k < 2; k++) {
      const inst = await shownInstance(careless, cInstances);
      carelessItems.push(inst.id);
      const wrong = wrongOrder(inst);
      if (k === 0) {
        // A mouse drag cancelled with Escape puts the step back: the order is as it was.
        const before = await order(careless);
        const from = await careless.locator("#steps li.step").nth(1).boundingBox();
        const to = await careless.locator("#steps li.step").nth(0).boundingBox();
        await careless.mouse.move(from.x + 60, from.y + from.height / 2);
        await careless.mouse.down();
        await careless.mouse.move(from.x + 60, to.y + 3, { steps: 5 });
        assert.notDeepEqual(await order(careless), before, "the step moves while dragged");
        await careless.keyboard.press("Escape");
        await careless.mouse.up();
        assert.deepEqual(await order(careless), before, "Escape cancelled the drag");
      }
      // The first step of the wrong order goes to the top by touch (on its handle), the rest by mouse and keys.
      const first = (await order(careless)).indexOf(wrong[0]);
      if (first > 0) {
        await touchDrag(careless, wrong[0], 0);
        assert.equal((await order(careless))[0], wrong[0], "a touch drag on the handle moved the step to the top");
      }
      await arrange(careless, wrong);
      assert.equal(await careless.inputValue("#order"), wrong.join(","));
      await careless.check("input[name=confidence][value='2']");
      await submitAndWait(careless);
    }
    assert.match(await careless.textContent("h1"), /Thank you/);
    assert.match(await careless.textContent("body"), /accuracy floor/);
    await shot(careless, "censored");
    // The dashboard: the person is censored, none of their judgements counts, every item is wanted again.
    await admin.goto(`${cBase}/admin`);
    assert.match(await admin.textContent("#workers"), /annotator-1\s*censored\s*–\s*0\s*–/);
    assert.equal(await admin.textContent("#open-count"), String(cInstances.length));
    // The next person gets the re-queued items first.
    const diligent = await (await browser.newContext()).newPage();
    await diligent.goto(diligentLink);
    const next = await shownInstance(diligent, cInstances);
    assert.ok(carelessItems.includes(next.id), `${next.id} is one of the careless person's items ${carelessItems}`);
    await arrange(diligent, next.references[0]);
    await diligent.check("input[name=confidence][value='5']");
    await submitAndWait(diligent);
    await admin.goto(`${cBase}/admin`);
    assert.equal(await admin.textContent("#open-count"), String(cInstances.length - 1));
    assert.match(await admin.textContent("#workers"), /annotator-2\s*active\s*–\s*1\s*100\.0%/);
    await shot(admin, "dashboard-censoring");
    // The dashboard's download is the export the command writes, file for file.
    const [download] = await Promise.all([admin.waitForEvent("download"), admin.click("#export-link")]);
    assert.equal(download.suggestedFilename(), "stepwise-export.zip");
    const zipPath = join(work, "dashboard-export.zip");
    await download.saveAs(zipPath);
    mkdirSync(join(work, "unzipped"));
    execFileSync("python3", ["-m", "zipfile", "-e", zipPath, join(work, "unzipped")]);
    sw("annotate", "export", "careless", "-o", "careless-results");
    for (const f of ["judgements.jsonl", "tables.json", "workers.jsonl", "summary.md"]) {
      assert.equal(readFileSync(join(work, "unzipped", "stepwise-export", f), "utf8"),
        readFileSync(join(work, "careless-results", f), "utf8"), `${f} of the download`);
    }
    const judged = readFileSync(join(work, "careless-results", "judgements.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(judged.map((j) => [j.annotator, j.counted]), [["annotator-1", false], ["annotator-1", false], ["annotator-2", true]]);
    assert.deepEqual(errors, []);
    console.log(`browser test passed: ${answered} items ordered (${drags} with drag and drop), 1 alternative order added; ` +
      `a careless person censored after 2 wrong orders (touch and mouse drags), their items re-queued, the export downloaded`);
  } finally {
    await browser.close();
  }
}

run(main);
