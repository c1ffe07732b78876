// Renders the templates of TEMPLATE_DIR named below over the conversations
// of conversations.json with @huggingface/jinja and with linserve
// (JINJA_RENDER), and fails unless each pair is byte-identical or both
// refuse. Python's Jinja judges every template (jinja_python_templates.py).
//   node jinja_conformance.mjs JINJA_RENDER TEMPLATE_DIR NPM_DIR
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [render, templateDir, npmDir] = process.argv.slice(2);
const { Template } = await import(
  pathToFileURL(join(npmDir, 'node_modules/@huggingface/jinja/dist/index.js')).href);

// The conversations, shared with jinja_python_templates.py: each with
// whether the tools go with it.
const { tools, conversations } = JSON.parse(
  readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'conversations.json'), 'utf8'));

const thinkingOptions = [undefined, true, false];
const cases = [];
for (const conversation of conversations) {
  for (const addGenerationPrompt of [true, false]) {
    for (const enableThinking of thinkingOptions) {
      const context = {
        messages: conversation.messages,
        add_generation_prompt: addGenerationPrompt,
        bos_token: '<s>',
        eos_token: '</s>',
      };
      if (conversation.with_tools) context.tools = tools;
      if (enableThinking !== undefined) context.enable_thinking = enableThinking;
      cases.push({ name: `${conversation.name} / add_generation_prompt=${addGenerationPrompt} / ` +
                         `enable_thinking=${enableThinking}`, context });
    }
  }
}

// Where the reference departs from Python's Jinja, which transformers'
// apply_chat_template renders with, linserve follows Python. Each such case
// is named here, matched on the two outcomes; any other difference fails.
const departures = [
  {
    reference: /Cannot apply filter "string" to type: NullValue/,
    ours: null,
    why: 'None|string: Python gives "None", the reference refuses',
  },
  {
    reference: /Cannot apply filter "trim" to type: UndefinedValue/,
    ours: null,
    why: 'an undefined|trim (a parameter without a description): Python gives "", the reference refuses',
  },
  {
    reference: /Unknown ArrayValue filter: trim/,
    ours: null,
    why: 'a list|trim: Python trims the list\'s str(), the reference refuses',
  },
  {
    reference: null,
    ours: /unsupported operand types for \+: string and (list|dict)/,
    why: 'a string + a list or dict (content as parts, or arguments as an object, where the template expects a string): ' +
         'Python raises TypeError, the reference joins the list\'s JSON',
  },
];
// The templates judged against this reference. It departs from Python on
// the others in ways beyond the list above (integer dict keys, a string
// times a number, "x"|safe + a string, a for loop over undefined), so those
// are judged against Python only.
const judgedHere = new Set([
  'Mistral-Small-3.2-24B-Instruct-2506.jinja',
  'NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja',
  'Qwen-QwQ-32B.jinja',
  'Qwen-Qwen3-0.6B.jinja',
  'Qwen3.5-0.8B.jinja',
  'Qwen3.5-4B.jinja',
  'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja',
  'google-gemma-2-2b-it.jinja',
  'meta-llama-Llama-3.1-8B-Instruct.jinja',
  'microsoft-Phi-3.5-mini-instruct.jinja',
  'mistralai-Mistral-Nemo-Instruct-2407.jinja',
]);
// Templates made for one kind of conversation only.
const onlyWithTools = new Set(['NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja']);

const work = mkdtempSync(join(tmpdir(), 'jinja-conformance-'));
const contextsPath = join(work, 'contexts.json');
writeFileSync(contextsPath, JSON.stringify(cases.map((c) => c.context)));

let failures = 0;
let compared = 0;
let bothRefused = 0;
const departed = new Map();
const templates = readdirSync(templateDir).filter((f) => judgedHere.has(f)).sort();
if (templates.length !== judgedHere.size) {
  console.log(`FAIL: ${judgedHere.size - templates.length} of the templates judged here are missing`);
  process.exit(1);
}
for (const file of templates) {
  const source = readFileSync(join(templateDir, file), 'utf8');
  const ours = JSON.parse(execFileSync(render, [join(templateDir, file), contextsPath],
                                       { maxBuffer: 1 << 28 }).toString());
  if (!Array.isArray(ours)) {
    console.log(`FAIL ${file}: linserve refused the template: ${ours.parse_error}`);
    failures++;
    continue;
  }
  const template = new Template(source);
  let templateFailures = 0;
  cases.forEach((c, i) => {
    if (onlyWithTools.has(file) && !c.context.tools) return;
    let expected;
    let expectedError;
    try {
      expected = template.render(structuredClone(c.context));
    } catch (e) {
      expectedError = String(e.message ?? e);
    }
    const got = ours[i];
    const departure = departures.find((d) =>
      (d.reference === null ? expectedError === undefined : d.reference.test(expectedError ?? '')) &&
      (d.ours === null ? got.error === undefined : d.ours.test(got.error ?? '')));
    if (departure !== undefined) {
      departed.set(departure.why, (departed.get(departure.why) ?? 0) + 1);
      return;
    }
    if (expectedError !== undefined) {
      if (got.error === undefined) {
        templateFailures++;
        if (templateFailures <= (process.env.VERBOSE ? 1000 : 3)) {
          console.log(`FAIL ${file} / ${c.name}: the reference refused (${expectedError}), linserve rendered`);
        }
      } else {
        bothRefused++;
      }
      return;
    }
    compared++;
    if (got.text !== expected) {
      templateFailures++;
      if (templateFailures <= (process.env.VERBOSE ? 1000 : 3)) {
        console.log(`FAIL ${file} / ${c.name}`);
        if (got.error !== undefined) {
          console.log(`  linserve refused: ${got.error}`);
        } else {
          let at = 0;
          while (at < expected.length && got.text[at] === expected[at]) at++;
          console.log(`  first difference at ${at}:`);
          console.log(`  reference: ${JSON.stringify(expected.slice(Math.max(0, at - 60), at + 60))}`);
          console.log(`  linserve:  ${JSON.stringify(got.text.slice(Math.max(0, at - 60), at + 60))}`);
        }
      }
    }
  });
  failures += templateFailures;
  console.log(`${templateFailures ? 'FAIL' : 'ok  '} ${file}: ${cases.length} conversations` +
              (templateFailures ? `, ${templateFailures} differ` : ''));
}
console.log(`${templates.length} templates, ${compared} renderings compared, ${bothRefused} refused by both, ` +
            `${failures} failures`);
for (const [why, count] of departed) console.log(`departure from the reference (${count}): ${why}`);
process.exit(failures ? 1 : 0);
