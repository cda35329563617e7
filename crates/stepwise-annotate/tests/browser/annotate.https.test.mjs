// HTTPS in a real browser (Debian's Chromium via playwright-core): `stepwise annotate serve --tls-cert/--tls-key`
// with a certificate made here by openssl; the admin signs in, makes an invite link (https://), an annotator
// opens it and orders an item. Every cookie the browser holds is Secure and HttpOnly, every page carries HSTS.
//
//   STEPWISE=target/debug/stepwise node annotate.https.test.mjs     (CHROMIUM defaults to /usr/bin/chromium)
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";
import { SHOTS, scratch } from "./common.mjs";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const { work, sw, serve, run } = scratch("stepwise-https-");

async function main() {
  sw("world", "generate", "-n", "6", "--image-size", "64", "-o", "world");
  sw("generate", "world", "--task", "sequencing", "--modality", "multimodal", "--seq-steps", "4", "--seq-min-steps", "4", "-o", "seq");
  sw("annotate", "create", "seq", "-o", "study", "--modalities", "text", "--judgements", "1", "--hit-size", "2");
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", "key.pem", "-out", "cert.pem"],
  { cwd: work, stdio: "ignore" });
  const base = await serve("study", "--tls-cert", "cert.pem", "--tls-key", "key.pem");
  assert.match(base, /^https:\/\//);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    // The certificate is self-signed: this context accepts it (a lab uses one its browsers trust).
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const admin = await context.newPage();
    const login = await admin.goto(`${base}/admin/login`);
    assert.equal(login.headers()["strict-transport-security"], "max-age=31536000");
    assert.equal(await admin.evaluate(() => location.protocol), "https:");
    await admin.fill("input[name=password]", readFileSync(join(work, "study", "admin-password.txt"), "utf8").trim());
    await admin.click("button[type=submit]");
    await admin.waitForSelector("#invite-form");
    await admin.click("#invite-form button[type=submit]");
    const link = await admin.$eval("code.invite", (e) => e.textContent);
    assert.match(link, /^https:\/\/127\.0\.0\.1:\d+\/join\//, "invite links keep the scheme");
    await admin.screenshot({ path: join(SHOTS, "https-dashboard.png"), fullPage: true });

    const person = await (await browser.newContext({ ignoreHTTPSErrors: true })).newPage();
    const joined = await person.goto(link);
    assert.equal(joined.headers()["strict-transport-security"], "max-age=31536000");
    await person.waitForSelector("#steps li.step");
    await person.screenshot({ path: join(SHOTS, "https-work.png"), fullPage: true });
    await person.locator("#steps li.step").nth(1).focus();
    await person.keyboard.press("Alt+ArrowUp");
    await person.check("input[name=confidence][value='3']");
    await person.click("#submit");
    await person.waitForLoadState("load");

    for (const c of [...(await context.cookies()), ...(await person.context().cookies())]) {
      assert.ok(c.secure && c.httpOnly, `cookie ${c.name} is Secure and HttpOnly: ${JSON.stringify(c)}`);
    }
    const names = (await person.context().cookies()).map((c) => c.name);
    assert.ok(names.includes("sw_session"), `the annotator has a session cookie: ${names}`);
    // Plain HTTP to the HTTPS port gets no page.
    await assert.rejects(fetch(base.replace("https://", "http://") + "/admin/login"));
    console.log("https browser test passed: Secure cookies, HSTS, https invite links, an item answered over TLS");
  } finally {
    await browser.close();
  }
}

run(main);
