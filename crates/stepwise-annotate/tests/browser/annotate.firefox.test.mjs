// The annotation pages in Firefox (Debian's firefox-esr, driven over WebDriver BiDi by puppeteer-core; no
// browser download): invite link, ordering by mouse drag, with the arrow buttons and with the keyboard, photos
// decoded, the follow-up questions, "all done", an alternative order added by a drag, and the export scored by
// `stepwise eval`.
//
//   STEPWISE=target/debug/stepwise node annotate.firefox.test.mjs     (FIREFOX defaults to /usr/bin/firefox-esr)
import puppeteer from "puppeteer-core";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";
import { SHOTS, scratch } from "./common.mjs";

const FIREFOX = process.env.FIREFOX ?? "/usr/bin/firefox-esr";
const { work, sw, serve, instancesOf, run } = scratch("stepwise-firefox-");
const order = (page) => page.$$eval("#steps li.step", (els) => els.map((e) => Number(e.dataset.item)));
const texts = (page) => page.$$eval("#steps li.step .text", (els) => els.map((e) => e.textContent));

async function signInAndInvite(page, base, study) {
  await page.goto(`${base}/admin/login`);
  await page.type("input[name=password]", readFileSync(join(work, study, "admin-password.txt"), "utf8").trim());
  await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
  await Promise.all([page.waitForNavigation(), page.click("#invite-form button[type=submit]")]);
  return page.$eval("code.invite", (e) => e.textContent);
}

/** Move item at index `from` to `to` (to < from) with the keyboard (odd moves) or the ↑ button (even). */
async function moveUp(page, item, steps, useKeyboard) {
  for (let k = 0; k < steps; k++) {
    if (useKeyboard) {
      await page.focus(`#steps li.step[data-item="${item}"]`);
      await page.keyboard.down("Alt");
      await page.keyboard.press("ArrowUp");
      await page.keyboard.up("Alt");
    } else {
      await page.click(`#steps li.step[data-item="${item}"] button.up`);
    }
  }
}

async function main() {
  sw("world", "generate", "-n", "8", "--image-size", "96", "-o", "world");
  sw("generate", "world", "--task", "sequencing", "--modality", "multimodal", "--seq-steps", "4", "--seq-min-steps", "4", "-o", "seq");
  sw("annotate", "create", "seq", "-o", "study", "--modalities", "multimodal,text", "--judgements", "1", "--hit-size", "2");
  const base = await serve("study");
  // No setViewport: ESR's BiDi lacks the screen-orientation override puppeteer sends with it.
  const browser = await puppeteer.launch({
    browser: "firefox", executablePath: FIREFOX, headless: true, defaultViewport: null, args: ["--window-size=1280,2400"],
  });
  let drags = 0;
  try {
    const version = await browser.version();
    const admin = await browser.newPage();
    const link = await signInAndInvite(admin, base, "study");
    const page = await (await browser.createBrowserContext()).newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(link);
    const instances = instancesOf("study");
    let answered = 0;
    let keyboardMoves = 0;
    for (let guard = 0; guard < 50; guard++) {
      if ((await page.$("#answer")) === null) break;
      const shown = await texts(page);
      const inst = instances.find((i) => i.items.every((it, k) => it.text === shown[k]));
      assert.ok(inst, "the page shows an instance's items");
      const multimodal = (await page.$("input[name=helped]")) !== null;
      if (multimodal) {
        // Polled from here: waitForFunction evaluates a new Function in the page, which the site's CSP forbids.
        let decoded = false;
        for (let t = 0; t < 100 && !decoded; t++) {
          decoded = await page.$$eval("#steps img", (imgs) => imgs.length > 0 && imgs.every((i) => i.complete && i.naturalWidth > 0));
          if (!decoded) await new Promise((r) => setTimeout(r, 100));
        }
        assert.ok(decoded, "multimodal items show their photos");
        await page.click("input[name=helped][value=image]");
      }
      const target = inst.references[0];
      if (answered === 0) {
        // One mouse drag: the second step dropped on top of the first (both in view).
        const before = await order(page);
        const [first, second] = await page.$$("#steps li.step");
        await first.scrollIntoView();
        const a = await second.boundingBox();
        const b = await first.boundingBox();
        await page.mouse.move(a.x + 20, a.y + Math.min(20, a.height / 2));
        await page.mouse.down();
        await page.mouse.move(b.x + 20, b.y + b.height / 2, { steps: 10 });
        await page.mouse.move(b.x + 20, b.y + 3, { steps: 5 });
        await page.mouse.up();
        assert.deepEqual(await order(page), [before[1], before[0], ...before.slice(2)], "a mouse drag moved the second step to the top");
        drags++;
      }
      for (let pos = 0; pos < target.length; pos++) {
        const cur = await order(page);
        const from = cur.indexOf(target[pos]);
        if (from > pos) {
          const kb = (pos + answered) % 2 === 0;
          await moveUp(page, target[pos], from - pos, kb);
          if (kb) keyboardMoves++;
        }
      }
      assert.deepEqual(await order(page), target);
      assert.equal(await page.$eval("#order", (e) => e.value), target.join(","));
      if (answered === 0) await page.screenshot({ path: join(SHOTS, "firefox-ordering.png"), fullPage: true });
      await page.click("input[name=confidence][value='5']");
      await Promise.all([page.waitForNavigation(), page.click("#submit")]);
      answered++;
    }
    assert.match(await page.$eval("h1", (e) => e.textContent), /All done/);
    assert.equal(answered, 8, `answered ${answered}`);
    assert.ok(keyboardMoves > 0, "the keyboard path was used");
    assert.deepEqual(errors, []);
    sw("annotate", "export", "study", "-o", "results");
    const report = sw("eval", "study/instances.jsonl", "-p", "results/predictions/multimodal-1.jsonl", "--skip-missing");
    assert.match(report, /\| all \| \d+ \| 100\.0/, report);

    // Alternatives with the keyboard.
    sw("annotate", "create", "seq", "-o", "alt", "--kind", "alternatives", "--judgements", "1", "--hit-size", "1");
    const altBase = await serve("alt");
    const altLink = await signInAndInvite(admin, altBase, "alt");
    const alt = await (await browser.createBrowserContext()).newPage();
    await alt.goto(altLink);
    const shown = await texts(alt);
    const inst = instancesOf("alt").find((i) => i.references[0].every((item, k) => i.items[item].text === shown[k]));
    assert.ok(inst, "the authored order is shown");
    const last = inst.references[0][inst.references[0].length - 1];
    await moveUp(alt, last, 1, true);
    await alt.click("#add-order");
    assert.equal(await alt.$eval("#alt-count", (e) => e.textContent), "1");
    await Promise.all([alt.waitForNavigation(), alt.click("#submit")]);
    sw("annotate", "export", "alt", "-o", "alt-results");
    const refs = readFileSync(join(work, "alt-results", "references.jsonl"), "utf8");
    assert.ok(refs.includes(inst.procedure), refs);
    console.log(`firefox test passed (${version}): ${answered} items ordered (${drags} by mouse drag, the rest with buttons ` +
      `and keyboard), 1 alternative added`);
  } finally {
    await browser.close();
  }
}

run(main);
