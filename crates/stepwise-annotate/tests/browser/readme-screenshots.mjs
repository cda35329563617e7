// The README's two pictures of the annotation app, taken from `stepwise demo`'s study in Debian's Chromium:
// a multimodal ordering item with one step being dragged, and the dashboard after a few people answered.
//
//   stepwise demo -o /tmp/demo
//   STEPWISE=target/debug/stepwise node readme-screenshots.mjs /tmp/demo/annotation ../../../../docs/images
//
// The study is served on a scratch database (the demo's own stays empty).
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import assert from "node:assert/strict";
import { scratch, submitAndWait } from "./common.mjs";

const [studyArg, outArg] = process.argv.slice(2);
if (!studyArg || !outArg) {
  console.error("usage: node readme-screenshots.mjs STUDY_FOLDER OUTPUT_FOLDER");
  process.exit(2);
}
const OUT = resolve(outArg);
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const STUDY = resolve(studyArg);
const { work, serve, run } = scratch("stepwise-readme-");

/** The instance a work page shows, told by its items' photos or texts in the order shown. */
async function shownInstance(page, instances) {
  const shown = await page.$$eval("#steps li.step", (els) =>
    els.map((e) => ({ img: e.querySelector("img")?.getAttribute("src") ?? null, text: e.querySelector(".text")?.textContent ?? null })));
  const inst = instances.find((i) => i.items.length === shown.length && i.items.every((it, k) =>
    (shown[k].text === null || it.text === shown[k].text) &&
    (shown[k].img === null || shown[k].img.endsWith(encodeURI(it.images[0] ?? "")))));
  assert.ok(inst, `the page shows a study instance: ${JSON.stringify(shown)}`);
  return inst;
}

const order = (page) => page.$$eval("#steps li.step", (els) => els.map((e) => Number(e.dataset.item)));

async function answer(page, inst, right) {
  // A careless answer swaps the first two steps.
  const target = [...inst.references[0]];
  if (!right) [target[0], target[1]] = [target[1], target[0]];
  for (let pos = 0; pos < target.length; pos++) {
    const from = (await order(page)).indexOf(target[pos]);
    await page.locator(`#steps li.step[data-item="${target[pos]}"]`).focus();
    for (let k = from; k > pos; k--) await page.keyboard.press("Alt+ArrowUp");
  }
  await page.check("input[name=confidence][value='4']");
  if (await page.locator("input[name=helped]").count()) await page.check("input[name=helped][value=both]");
  await submitAndWait(page);
}

async function main() {
  const base = await serve(STUDY, "--database", `sqlite://${join(work, "screenshots.sqlite")}?mode=rwc`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    const admin = await (await browser.newContext({ viewport: { width: 1200, height: 900 } })).newPage();
    await admin.goto(`${base}/admin/login`);
    await admin.fill("input[name=password]", readFileSync(join(STUDY, "admin-password.txt"), "utf8").trim());
    await admin.click("button[type=submit]");
    await admin.waitForSelector("#invite-form");
    await admin.fill("#invite-form input[name=count]", "3");
    await admin.click("#invite-form button[type=submit]");
    const links = await admin.$$eval("code.invite", (els) => els.map((e) => e.textContent));
    const instances = readFileSync(join(STUDY, "instances.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    // Three people answer a HIT each (the third carelessly), so the dashboard has numbers to show.
    for (const [k, link] of links.entries()) {
      const page = await (await browser.newContext({ viewport: { width: 1100, height: 1000 } })).newPage();
      await page.goto(link);
      for (let i = 0; i < 5 && (await page.locator("#answer").count()) > 0; i++) {
        await answer(page, await shownInstance(page, instances), k < 2);
      }
    }
    // The ordering page of a multimodal item, a step held half-way through a drag: new people until one is
    // handed a multimodal HIT (a HIT's modality is the study's most wanted), the others answer theirs.
    let person = null;
    for (let tries = 0; tries < 8 && !person; tries++) {
      await admin.goto(`${base}/admin`);
      await admin.fill("#invite-form input[name=count]", "1");
      await admin.click("#invite-form button[type=submit]");
      const [link] = await admin.$$eval("code.invite", (els) => els.map((e) => e.textContent));
      const page = await (await browser.newContext({ viewport: { width: 1100, height: 2100 } })).newPage();
      await page.goto(link);
      if ((await page.locator("input[name=helped]").count()) > 0) { person = page; break; }
      for (let i = 0; i < 5 && (await page.locator("#answer").count()) > 0; i++) {
        await answer(page, await shownInstance(page, instances), true);
      }
    }
    assert.ok(person, "someone was handed a multimodal HIT");
    await person.waitForFunction(() => Array.from(document.querySelectorAll("#steps img")).every((i) => i.complete));
    const steps = person.locator("#steps li.step");
    const a = await steps.nth(2).boundingBox();
    const b = await steps.nth(1).boundingBox();
    await person.mouse.move(a.x + 60, a.y + a.height / 2);
    await person.mouse.down();
    await person.mouse.move(a.x + 60, b.y + 10, { steps: 6 });
    await person.screenshot({ path: join(OUT, "annotate-ordering.png") });
    await person.mouse.up();
    await admin.goto(`${base}/admin`);
    await admin.screenshot({ path: join(OUT, "annotate-dashboard.png") });
    console.log(`wrote ${join(OUT, "annotate-ordering.png")} and ${join(OUT, "annotate-dashboard.png")}`);
  } finally {
    await browser.close();
  }
}

run(main);
