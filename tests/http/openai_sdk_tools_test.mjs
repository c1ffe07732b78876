// A tool round trip through the official `openai` npm package, against a
// live linserve serving a model with Qwen3.5's chat template (its calls in
// the XML format the server reads back): a required call whose arguments
// the SDK parses, the same call streamed and put together by the SDK's own
// stream helper, and the call's result sent back for the next turn.
// Usage: node openai_sdk_tools_test.mjs BASE_URL NODE_DIR
import assert from "node:assert/strict";
import { check, connect, finish } from "./sdk_test_common.mjs";

const { client, baseUrl } = await connect("openai_sdk_tools_test.mjs");

const model = (await client.models.list()).data[0];
const tools = [{ type: "function", function: { name: "get_weather", strict: true,
  parameters: { type: "object", additionalProperties: false, required: ["city", "days"],
                properties: { city: { type: "string", maxLength: 10 },
                              days: { type: "integer", minimum: 1, maximum: 7 } } } } }];
const messages = [{ role: "user", content: "Weather in Oslo?" }];
const request = { model: model.id, seed: 3, temperature: 1, max_tokens: 256, tools, messages,
  tool_choice: "required", parallel_tool_calls: false };

await check("the model's call format is reported", async () => {
  assert.equal(model.tool_call_format, "qwen3_coder");
});

await check("a tool round trip: call, streamed call, result, next turn", async () => {
  const whole = await client.chat.completions.parse(request);
  const choice = whole.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.function.name, "get_weather");
  assert.equal(typeof call.function.parsed_arguments.city, "string");
  assert.ok(Number.isInteger(call.function.parsed_arguments.days));

  // The SDK's stream helper puts the deltas together as OpenAI's.
  const stream = client.chat.completions.stream(request);
  const streamed = await stream.finalChatCompletion();
  assert.equal(streamed.choices[0].finish_reason, "tool_calls");
  assert.equal(streamed.choices[0].message.tool_calls.length, 1);
  assert.equal(streamed.choices[0].message.tool_calls[0].function.name, "get_weather");
  assert.equal(streamed.choices[0].message.tool_calls[0].function.arguments,
               call.function.arguments);

  const history = [...messages, { role: "assistant", content: null, tool_calls: [
      { id: call.id, type: "function", function: { name: call.function.name,
                                                   arguments: call.function.arguments } }] },
    { role: "tool", tool_call_id: call.id, content: "rain, 4 degrees" }];
  const rendered = await (await fetch(`${baseUrl}/tokenize`, { method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: model.id, messages: history, tools }) })).json();
  assert.ok(rendered.prompt.includes("<tool_response>\nrain, 4 degrees\n</tool_response>"),
            rendered.prompt);
  assert.ok(rendered.prompt.includes(`<function=get_weather>`), rendered.prompt);
  const next = await client.chat.completions.create({ model: model.id, seed: 5, max_tokens: 8,
    tools, messages: history });
  assert.ok(["stop", "length", "tool_calls"].includes(next.choices[0].finish_reason));
});

finish();
