// Shared by the browser tests: a scratch folder, the stepwise binary, servers started on free ports.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const STEPWISE = process.env.STEPWISE ?? "target/debug/stepwise";
export const SHOTS = process.env.SCREENSHOTS ?? join(process.cwd(), "target", "browser-screenshots");
mkdirSync(SHOTS, { recursive: true });

export function scratch(prefix) {
  const work = mkdtempSync(join(tmpdir(), prefix));
  const servers = [];
  /** Run `stepwise -q ARGS` in the scratch folder; returns stdout. */
  const sw = (...args) =>
    execFileSync(STEPWISE, ["-q", ...args], { cwd: work, stdio: ["ignore", "pipe", "inherit"] }).toString();
  /** `stepwise annotate serve` on a free port (more arguments after `study`); resolves to its base URL. */
  const serve = (study, ...extra) =>
    new Promise((resolve, reject) => {
      const args = ["-q", "annotate", "serve", "--study", study, "--bind", "127.0.0.1:0", ...extra];
      const p = spawn(STEPWISE, args, { cwd: work });
      servers.push(p);
      let out = "";
      p.stdout.on("data", (d) => {
        out += d;
        const m = out.match(/listening on (https?:\/\/[^\s]+)/);
        if (m) resolve(m[1].replace(/\/$/, ""));
      });
      p.stderr.on("data", (d) => process.stderr.write(d));
      p.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
    });
  const instancesOf = (study) =>
    readFileSync(join(work, study, "instances.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  /** Run `main`, stop the servers, keep the folder only on failure. */
  const run = (main) =>
    main()
      .then(() => { servers.forEach((s) => s.kill("SIGTERM")); rmSync(work, { recursive: true, force: true }); })
      .catch((e) => {
        console.error(e);
        servers.forEach((s) => s.kill("SIGTERM"));
        console.error(`work folder kept: ${work}`);
        process.exit(1);
      });
  return { work, sw, serve, instancesOf, run };
}

/** Submit a work page and wait for the next (a Playwright page): a work form for another item, or no form at all
 *  ("all done"). */
export async function submitAndWait(page) {
  const before = await page.getAttribute("#answer", "action");
  await page.click("#submit");
  await page.waitForFunction((prev) => {
    const f = document.getElementById("answer");
    return document.readyState === "complete" && (!f || f.getAttribute("action") !== prev);
  }, before);
}
