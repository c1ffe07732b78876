// What the SDK test scripts share: their arguments, the official `openai`
// package (from the build tree's node_modules, so imported by path), a
// client without retries (a 429 or 5xx must show as the failure it is), and
// named checks that count failures and end the run with its verdict.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export async function connect(script) {
  const [baseUrl, nodeDir] = process.argv.slice(2);
  if (!baseUrl || !nodeDir) {
    console.error(`usage: node ${script} BASE_URL NODE_DIR`);
    process.exit(2);
  }
  const { default: OpenAI } = await import(
    pathToFileURL(join(nodeDir, "node_modules", "openai", "index.mjs")).href);
  const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "unused", maxRetries: 0,
    timeout: 30_000 });
  return { OpenAI, client, baseUrl, nodeDir };
}

let failures = 0;

// Runs one named check; a thrown error is its failure, printed with its stack.
export async function check(what, body) {
  try {
    await body();
    console.log(`ok: ${what}`);
  } catch (error) {
    failures++;
    console.log(`FAIL: ${what}\n  ${(error.stack ?? String(error)).replaceAll("\n", "\n  ")}`);
  }
}

// Exits 1 when a check failed.
export function finish() {
  if (failures > 0) {
    console.log(`${failures} check(s) failed`);
    process.exit(1);
  }
  console.log("all checks passed");
}
