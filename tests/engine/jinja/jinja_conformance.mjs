// Renders every template of TEMPLATE_DIR over the conversations below with
// @huggingface/jinja and with linserve (JINJA_RENDER), and fails unless
// each pair is byte-identical or both refuse.
//   node jinja_conformance.mjs JINJA_RENDER TEMPLATE_DIR NPM_DIR
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [render, templateDir, npmDir] = process.argv.slice(2);
const { Template } = await import(
  pathToFileURL(join(npmDir, 'node_modules/@huggingface/jinja/dist/index.js')).href);

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city, now.',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', description: 'City name, e.g. "Paris"' },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
          days: { type: 'integer' },
        },
        required: ['city'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'search',
      description: 'Searches the web. Returns <= 10 results; ünïcödé 中文.',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string' },
          filters: { type: 'object', properties: { site: { type: 'string' } } },
          exact: { type: 'boolean' },
          threshold: { type: 'number' },
        },
        required: ['query'],
      },
    },
  },
];

const call = (id, name, args) => ({ id, type: 'function', function: { name, arguments: args } });
const user = (content) => ({ role: 'user', content });
const system = (content) => ({ role: 'system', content });
const assistant = (content, extra = {}) => ({ role: 'assistant', content, ...extra });
const tool = (content, id, name) => ({ role: 'tool', content, tool_call_id: id, name });

// Each conversation, with whether tools go with it.
const conversations = [
  { name: 'one user turn', messages: [user('Hello!')] },
  { name: 'system and user', messages: [system('You are terse.'), user('Hi there')] },
  {
    name: 'multi-turn',
    messages: [system('Be kind.'), user('What is 2+2?'), assistant('4.'), user('And 3+3?')],
  },
  {
    name: 'multi-turn without system',
    messages: [user('a'), assistant('b'), user('c'), assistant('d'), user('e')],
  },
  {
    name: 'reasoning_content in history',
    messages: [
      user('Think first: 17*3?'),
      assistant('51', { reasoning_content: '17*3 = 51.' }),
      user('Now 18*3?'),
    ],
  },
  {
    name: 'think tags in history, last turn after the query',
    messages: [
      user('Q1'),
      assistant('<think>\nfirst thought\n</think>\n\nA1'),
      user('Q2'),
      assistant('<think>second thought</think>A2'),
    ],
  },
  {
    name: 'content as a list of parts',
    messages: [
      system([{ type: 'text', text: 'System part.' }]),
      user([{ type: 'text', text: 'Part one. ' }, { type: 'text', text: 'Part two.' }]),
    ],
  },
  {
    name: 'special text in content',
    messages: [user('<|im_start|>system\nignore <think> "quotes" \\back\\slash\ttab ünïcödé 🙂 中文')],
  },
  { name: 'tools given, one user turn', tools, messages: [user("What's the weather in Paris?")] },
  {
    name: 'tools with system',
    tools,
    messages: [system('Use tools when needed.'), user('Weather in Oslo, in celsius?')],
  },
  {
    name: 'a tool call with object arguments and its result',
    tools,
    messages: [
      user('Weather in Paris for 3 days?'),
      assistant('', { tool_calls: [call('call_1', 'get_weather', { city: 'Paris', unit: 'celsius', days: 3 })] }),
      tool('{"temperature": 21, "sky": "clear"}', 'call_1', 'get_weather'),
    ],
  },
  {
    name: 'tool arguments of every JSON type, then the answer',
    tools,
    messages: [
      system('You can search.'),
      user('Search for linear attention'),
      assistant('Let me search.', {
        tool_calls: [
          call('call_2', 'search', {
            query: 'linear "attention"\nRWKV',
            filters: { site: 'arxiv.org', tags: ['a', 'b'] },
            exact: true,
            threshold: 0.75,
            limit: 10,
            missing: null,
            list: [1, 2.5, 'x', false],
          }),
        ],
      }),
      tool('[{"title": "RWKV-7"}]', 'call_2', 'search'),
      assistant('Found RWKV-7.'),
      user('Thanks'),
    ],
  },
  {
    name: 'two tool calls in one turn, two results',
    tools,
    messages: [
      user('Weather in Paris and Rome?'),
      assistant(null, {
        tool_calls: [
          call('call_a', 'get_weather', { city: 'Paris' }),
          call('call_b', 'get_weather', { city: 'Rome' }),
        ],
      }),
      tool('sunny', 'call_a', 'get_weather'),
      tool('rainy', 'call_b', 'get_weather'),
    ],
  },
  {
    name: 'tool call with reasoning, then a new query',
    tools,
    messages: [
      user('Weather in Paris?'),
      assistant('', {
        reasoning_content: 'I should call the tool.',
        tool_calls: [call('call_c', 'get_weather', { city: 'Paris' })],
      }),
      tool('sunny', 'call_c', 'get_weather'),
      assistant('It is sunny.', { reasoning_content: 'The tool said sunny.' }),
      user('And tomorrow?'),
    ],
  },
  {
    name: 'tool call with arguments as a JSON string',
    tools,
    messages: [
      user('Weather in Lima?'),
      assistant('', { tool_calls: [call('call_d', 'get_weather', '{"city": "Lima"}')] }),
      tool('warm', 'call_d', 'get_weather'),
    ],
  },
  {
    name: 'assistant turn last',
    messages: [user('Say hi'), assistant('Hi!')],
  },
];

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
      if (conversation.tools) context.tools = conversation.tools;
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
// Templates made for one kind of conversation only.
const onlyWithTools = new Set(['NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja']);

const work = mkdtempSync(join(tmpdir(), 'jinja-conformance-'));
const contextsPath = join(work, 'contexts.json');
writeFileSync(contextsPath, JSON.stringify(cases.map((c) => c.context)));

let failures = 0;
let compared = 0;
let bothRefused = 0;
const departed = new Map();
const templates = readdirSync(templateDir).filter((f) => f.endsWith('.jinja')).sort();
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
