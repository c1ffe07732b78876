// The playground in Chromium: two turns, a fork at the first, a turn on the
// fork, then export and import; both branches are checked through the API.
// Usage: node playground_test.mjs BASE_URL NODE_DIR CHROMIUM SCREENSHOT
// Exits 77 when Chromium cannot start on this machine.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import fs from "node:fs";
import os from "node:os";

const [baseUrl, nodeDir, chromiumPath, screenshot] = process.argv.slice(2);
const require = createRequire(path.join(nodeDir, "node_modules", "x.js"));
const { chromium } = require("playwright-core");

let browser;
try {
  browser = await chromium.launch({ executablePath: chromiumPath,
                                    args: ["--no-sandbox", "--disable-dev-shm-usage"] });
} catch (error) {
  console.log(`SKIP: Chromium cannot start here: ${error.message.split("\n")[0]}`);
  process.exit(77);
}

async function api(route, init = {}) {
  const response = await fetch(baseUrl + route, init);
  assert.ok(response.ok, `${route}: ${response.status} ${await response.clone().text()}`);
  return response.json();
}

// What the page keeps (the tree of checkpoints and the live session).
const kept = (page) => page.evaluate(() => JSON.parse(localStorage.getItem("linserve-playground")));

async function chat(page, text, turns) {
  await page.fill("#prompt", text);
  await page.click("#send");
  // The turn is over when its checkpoint is in the tree.
  await page.waitForFunction((n) => {
    const state = JSON.parse(localStorage.getItem("linserve-playground") || "null");
    return state && Object.keys(state.nodes).length === n && !document.querySelector("#send").disabled;
  }, turns, { timeout: 120000 });
}

// A branch's history, continued through the API from a fork of its
// checkpoint, equals a stateless chat of that whole history: the session
// holds exactly that branch's turns.
async function checkBranch(node, label) {
  const next = { role: "user", content: "BENVOLIO:\nWhat news?" };
  const fork = await api(`/v1/sessions/${node.session}/fork`, { method: "POST", body: "" });
  const ask = (extra) => api("/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ max_tokens: 24, temperature: 0.8, seed: 5, ...extra }),
  });
  const continued = await ask({ session_id: fork.id, messages: [next] });
  const history = node.messages.map(({ role, content }) => ({ role, content }));
  const stateless = await ask({ messages: [...history, next] });
  assert.equal(continued.choices[0].message.content, stateless.choices[0].message.content,
               `${label}: the session does not hold the branch's history`);
}

try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 },
                                       acceptDownloads: true });
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(baseUrl + "/");
  await page.waitForFunction(() => !document.querySelector("#model").textContent.includes("…"));

  // Short answers: turns cut by max_tokens, whose sessions lack the turn's
  // end until the next chat turn feeds it, forks included.
  await page.locator("summary", { hasText: "Sampling" }).click();
  await page.fill("#max_tokens", "24");
  await chat(page, "ROMEO:\nSpeak again.", 1);
  await chat(page, "JULIET:\nWho is there?", 2);
  assert.match(await page.textContent("#speed"), /first token \d+ ms/);
  const main = await kept(page);
  assert.equal(main.live.messages.length, 4);

  // Fork at the first turn, and chat on the fork.
  await page.locator("#messages li.assistant button.fork").first().click();
  await page.waitForFunction(() => document.querySelectorAll("#messages li").length === 2);
  await chat(page, "MERCUTIO:\nNay, gentle Romeo.", 3);
  const forked = await kept(page);
  const nodes = Object.values(forked.nodes);
  const first = nodes.find((n) => n.parent === null);
  const leaves = nodes.filter((n) => n.parent === first.id);
  assert.equal(leaves.length, 2, "two branches from the first turn");
  const [mainLeaf, forkLeaf] = leaves.sort((a, b) =>
    a.messages[2].content.startsWith("JULIET") ? -1 : 1);
  assert.ok(mainLeaf.messages[2].content.startsWith("JULIET"));
  assert.ok(forkLeaf.messages[2].content.startsWith("MERCUTIO"));
  assert.deepEqual(forkLeaf.messages.slice(0, 2), first.messages.slice(0, 2));
  await checkBranch(mainLeaf, "the first branch");
  await checkBranch(forkLeaf, "the fork");
  assert.equal(await page.locator("#tree li").count(), 3);

  // Export the live session, import the file back: a new session at its position.
  const exported = forked.live.session;
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "playground-")), "exported.state");
  await download.saveAs(file);
  await page.setInputFiles("#import", file);
  await page.waitForFunction(() => document.querySelector("#status").textContent.startsWith("imported"));
  const imported = (await kept(page)).live.session;
  assert.notEqual(imported, exported);
  assert.equal((await api(`/v1/sessions/${imported}`)).position,
               (await api(`/v1/sessions/${exported}`)).position);

  // Back to the fork for the picture.
  await page.locator("#tree li span").last().click();
  await page.waitForFunction(() => document.querySelectorAll("#messages li").length === 4);
  await page.click("#refresh");
  await page.screenshot({ path: screenshot, fullPage: true });
  assert.deepEqual(errors, [], "the page logged errors");
  console.log(`ok: two turns, a fork at the first, a turn on the fork, export and import; ${screenshot}`);
} finally {
  await browser.close();
}
