// The Vercel AI SDK (`ai` with its OpenAI-compatible provider, packages
// nobody here wrote) against a live linserve serving Qwen3.5's chat template
// on the byte model, whose turns open the reasoning: streamText shows the
// reasoning apart from the text (equal to what the HTTP API's
// reasoning_content holds for the same seed), generateText calls a tool over
// several steps (each call parsed from the model's XML, fitting the zod
// schema, its result rendered back for the next step), and generateObject
// gets an object its schema validates.
// Usage: node vercel_ai_sdk_test.mjs BASE_URL NODE_DIR
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const [baseUrl, nodeDir] = process.argv.slice(2);
const require = createRequire(nodeDir + "/");
const { streamText, generateText, generateObject, tool, stepCountIs } = require("ai");
const { createOpenAICompatible } = require("@ai-sdk/openai-compatible");
const { z } = require("zod");

const provider = createOpenAICompatible({
  name: "linserve",
  baseURL: baseUrl + "/v1",
  supportsStructuredOutputs: true,
});
const model = provider.chatModel("default");
const messages = [{ role: "user", content: "Hi" }];

// streamText: reasoning and text apart, as the HTTP API splits them.
{
  const result = streamText({ model, messages, maxOutputTokens: 12, temperature: 0.8, seed: 3 });
  let streamedReasoning = "";
  for await (const part of result.fullStream) {
    if (part.type === "reasoning-delta") streamedReasoning += part.text;
  }
  const reasoning = await result.reasoningText;
  assert.ok(reasoning && reasoning.length > 0, "streamText gave no reasoning");
  assert.equal(streamedReasoning, reasoning);
  const direct = await fetch(baseUrl + "/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "default", messages, max_tokens: 12, temperature: 0.8, seed: 3 }),
  }).then((r) => r.json());
  assert.equal(reasoning, direct.choices[0].message.reasoning_content);
  assert.equal(await result.text, direct.choices[0].message.content);
  console.log("streamText: reasoning of", reasoning.length, "bytes, as the HTTP API's");
}

// generateText: a required tool over three steps, each call's arguments
// checked by the SDK against the zod schema, each result sent back.
{
  const seen = [];
  const result = await generateText({
    model,
    messages: [{ role: "user", content: "Weather in Paris?" }],
    tools: {
      get_weather: tool({
        description: "The weather in a city",
        inputSchema: z.object({ city: z.enum(["Paris", "Oslo"]), days: z.number().int().min(1).max(3) }),
        execute: async ({ city, days }) => {
          seen.push(city);
          return `sunny in ${city} for ${days} days`;
        },
      }),
    },
    toolChoice: "required",
    stopWhen: stepCountIs(3),
    maxOutputTokens: 400,
    temperature: 1,
    seed: 7,
  });
  assert.equal(result.steps.length, 3);
  for (const step of result.steps) {
    assert.ok(step.toolCalls.length >= 1, "a step without a call");
    assert.equal(step.finishReason, "tool-calls");
    assert.equal(step.toolResults.length, step.toolCalls.length, JSON.stringify(step.content));
  }
  assert.ok(seen.length >= 3);
  console.log("generateText: 3 steps,", seen.length, "calls:", seen.join(", "));
}

// generateObject: the schema as a json_schema constraint; the template
// opened the reasoning, and the constraint closes it, so the answer is the
// object.
{
  const { object } = await generateObject({
    model,
    schema: z.object({ color: z.enum(["red", "green"]), n: z.number().int().min(0).max(9) }),
    messages: [{ role: "user", content: "Pick a color and a digit." }],
    maxOutputTokens: 60,
    temperature: 1,
    seed: 11,
  });
  assert.ok(["red", "green"].includes(object.color));
  assert.ok(Number.isInteger(object.n));
  console.log("generateObject:", JSON.stringify(object));
}
console.log("PASS");
