// The official `openai` npm package against a live linserve's HTTP API:
// streamed answers equal non-streamed ones with the same seed, usage counts
// the tokens, a session continued by id answers what stateless requests with
// the whole history answer, and bad requests come back as the SDK's APIError
// with the right status; a json_schema answer and a required tool call
// parse in the SDK itself.
// Usage: node openai_sdk_test.mjs BASE_URL NODE_DIR
// (BASE_URL http://127.0.0.1:PORT; NODE_DIR holds node_modules/openai).
import assert from "node:assert/strict";
import { check, connect, finish } from "./sdk_test_common.mjs";

const { OpenAI, client, baseUrl } = await connect("openai_sdk_test.mjs");

// POST /tokenize (not in the SDK): {tokens, count} of a prompt or messages.
async function tokenize(body) {
  const response = await fetch(`${baseUrl}/tokenize`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  assert.equal(response.status, 200, `/tokenize answered ${response.status}`);
  const answer = await response.json();
  assert.equal(answer.count, answer.tokens.length);
  return answer;
}

async function tokenCount(body) {
  return (await tokenize(body)).count;
}

// Reads a stream of chunks; returns the text, the chunks with choices, and
// the usage chunk (choices empty) if one came, after checking that it came
// last.
async function drain(stream, pieceOf) {
  let text = "";
  const chunks = [];
  let usageChunk = null;
  for await (const chunk of stream) {
    assert.equal(usageChunk, null, "a chunk came after the usage chunk");
    if (chunk.choices.length === 0) {
      usageChunk = chunk;
      continue;
    }
    assert.equal(chunk.choices.length, 1);
    assert.ok(chunk.usage == null, "a content chunk carries usage");
    text += pieceOf(chunk.choices[0]);
    chunks.push(chunk);
  }
  assert.ok(chunks.length > 1, `only ${chunks.length} content chunk(s): not streamed`);
  for (const [i, chunk] of chunks.entries()) {
    const reason = chunk.choices[0].finish_reason;
    if (i + 1 < chunks.length) assert.equal(reason, null, `chunk ${i} has finish_reason ${reason}`);
    else assert.ok(reason === "stop" || reason === "length", `last finish_reason ${reason}`);
    assert.equal(chunk.id, chunks[0].id, "the chunks' ids differ");
  }
  return { text, chunks, usageChunk, finishReason: chunks.at(-1).choices[0].finish_reason };
}

const model = "default";
const maxTokens = 48;

await check(`models.list() lists one model, "${model}"`, async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);
  assert.equal(models.data[0].object, "model");
});

// ignore_eos: the answers run to max_tokens, so the count is known.
const completionRequest = { model, prompt: "ROMEO:", max_tokens: maxTokens, temperature: 0.8,
  seed: 7, ignore_eos: true };

await check("completion: streamed text equals the non-streamed text (seed 7, temperature 0.8)",
  async () => {
    const whole = await client.completions.create(completionRequest);
    assert.equal(whole.object, "text_completion");
    assert.equal(whole.model, model);
    assert.equal(whole.choices.length, 1);
    assert.equal(whole.choices[0].finish_reason, "length");
    assert.ok(whole.choices[0].text.length > 0, "empty text");
    const streamed = await drain(await client.completions.create({ ...completionRequest,
      stream: true }), (choice) => choice.text);
    assert.equal(streamed.usageChunk, null, "a usage chunk without stream_options.include_usage");
    assert.equal(streamed.chunks[0].object, "text_completion");
    assert.equal(streamed.finishReason, "length");
    assert.equal(streamed.text, whole.choices[0].text);
  });

await check("completion usage: completion_tokens is the tokens generated, total is the sum",
  async () => {
    const whole = await client.completions.create(completionRequest);
    const usage = whole.usage;
    assert.equal(usage.completion_tokens, maxTokens);
    assert.equal(usage.completion_tokens, await tokenCount({ prompt: whole.choices[0].text }));
    assert.equal(usage.prompt_tokens, await tokenCount({ prompt: completionRequest.prompt }));
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    const streamed = await drain(await client.completions.create({ ...completionRequest,
      stream: true, stream_options: { include_usage: true } }), (choice) => choice.text);
    assert.ok(streamed.usageChunk, "no usage chunk with stream_options.include_usage");
    assert.deepEqual(streamed.usageChunk.choices, []);
    assert.equal(streamed.usageChunk.usage.completion_tokens, maxTokens);
    assert.equal(streamed.usageChunk.usage.prompt_tokens, usage.prompt_tokens);
    assert.equal(streamed.usageChunk.usage.total_tokens, usage.total_tokens);
  });

await check("completion: a prompt of token ids answers what its text answers", async () => {
  const { tokens } = await tokenize({ prompt: completionRequest.prompt });
  const byText = await client.completions.create(completionRequest);
  const byTokens = await client.completions.create({ ...completionRequest, prompt: tokens });
  assert.equal(byTokens.choices[0].text, byText.choices[0].text);
  assert.equal(byTokens.usage.prompt_tokens, tokens.length);
});

const chatRequest = { model, max_tokens: maxTokens, temperature: 0.8, seed: 11, ignore_eos: true,
  messages: [{ role: "system", content: "A scene in Verona." },
    { role: "user", content: "Who is there?" }] };

await check("chat: streamed text equals the non-streamed text (seed 11, temperature 0.8)",
  async () => {
    const whole = await client.chat.completions.create(chatRequest);
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.choices.length, 1);
    assert.equal(whole.choices[0].message.role, "assistant");
    // The chat template's stop string (a blank line) may end it early.
    const reason = whole.choices[0].finish_reason;
    assert.ok(reason === "stop" || reason === "length", `finish_reason ${reason}`);
    if (reason === "length") assert.equal(whole.usage.completion_tokens, maxTokens);
    else assert.ok(whole.usage.completion_tokens <= maxTokens);
    console.log(`  chat answer (${reason}): ${JSON.stringify(whole.choices[0].message.content)}`);
    assert.equal(whole.usage.total_tokens,
      whole.usage.prompt_tokens + whole.usage.completion_tokens);
    assert.equal(whole.usage.prompt_tokens, await tokenCount({ messages: chatRequest.messages }));
    const streamed = await drain(await client.chat.completions.create({ ...chatRequest,
      stream: true, stream_options: { include_usage: true } }),
    (choice) => choice.delta.content ?? "");
    const first = streamed.chunks[0];
    assert.equal(first.object, "chat.completion.chunk");
    assert.deepEqual(first.choices[0].delta, { role: "assistant", content: "" });
    assert.deepEqual(streamed.chunks.at(-1).choices[0].delta, {});
    assert.equal(streamed.finishReason, reason);
    assert.equal(streamed.text, whole.choices[0].message.content);
    assert.ok(streamed.usageChunk, "no usage chunk with stream_options.include_usage");
    for (const field of ["prompt_tokens", "completion_tokens", "total_tokens"]) {
      assert.equal(streamed.usageChunk.usage[field], whole.usage[field], field);
    }
  });

// Three turns on a session (only the new message sent each time) against
// three stateless requests that send the whole history, with the same seeds.
const system = { role: "system", content: "A street in Verona." };
const userTurns = ["Good morrow, cousin.", "What news from Mantua?", "Then farewell."];
const seeds = [101, 102, 103];
// 32 tokens: with these seeds the default model ends turns both ways, at the
// template's stop string (a blank line) and at max_tokens.
const turnRequest = { model, max_tokens: 32, temperature: 0.8, ignore_eos: true };

await check("chat session: three turns by session_id answer what the whole history answers",
  async () => {
    let sessionId = null;
    let position = 0;
    const sessionTexts = [];
    const reasons = [];
    for (const [i, content] of userTurns.entries()) {
      const messages = i === 0 ? [system, { role: "user", content }] : [{ role: "user", content }];
      const request = { ...turnRequest, seed: seeds[i], messages,
        ...(i === 0 ? { session: "new" } : { session_id: sessionId }) };
      let text;
      if (i < 2) {
        const { data, response } = await client.chat.completions.create(request).withResponse();
        if (i === 0) {
          sessionId = data.session_id;
          assert.ok(typeof sessionId === "string" && sessionId.length > 0,
            `session_id ${sessionId}`);
        }
        assert.equal(data.session_id, sessionId);
        assert.equal(response.headers.get("x-session-id"), sessionId);
        assert.ok(data.session_position > position,
          `turn ${i}: session_position ${data.session_position} after ${position}`);
        position = data.session_position;
        text = data.choices[0].message.content;
        reasons.push(data.choices[0].finish_reason);
      } else {
        // The last turn streamed: every chunk names the session.
        const streamed = await drain(await client.chat.completions.create({ ...request,
          stream: true }), (choice) => choice.delta.content ?? "");
        for (const chunk of streamed.chunks) assert.equal(chunk.session_id, sessionId);
        text = streamed.text;
        reasons.push(streamed.finishReason);
      }
      sessionTexts.push(text);
    }
    // The reasons matter: a turn that ran to max_tokens never sampled the
    // template's stop string (the assistant's suffix), which the stateless
    // history renders after it, so the session has to be given it.
    console.log(`  session ${sessionId}: ${JSON.stringify(sessionTexts)} (${reasons})`);

    const history = [system];
    for (const [i, content] of userTurns.entries()) {
      history.push({ role: "user", content });
      const answer = await client.chat.completions.create({ ...turnRequest, seed: seeds[i],
        messages: history });
      assert.equal(answer.session_id, undefined, "a stateless answer names a session");
      assert.equal(answer.choices[0].message.content, sessionTexts[i], `turn ${i}`);
      // Sent back verbatim, as the SDK returned it.
      history.push(answer.choices[0].message);
    }
  });

// Structured output, parsed by the SDK itself: chat.completions.parse
// JSON.parses a json_schema answer into message.parsed, and a strict
// function's arguments into parsed_arguments.
await check("a json_schema answer and a required tool call parse in the SDK", async () => {
  const schema = { type: "object", additionalProperties: false, required: ["speaker", "mood"],
    properties: { speaker: { type: "string", maxLength: 12 }, mood: { enum: ["happy", "sad"] } } };
  for (const seed of [1, 2, 3]) {
    const answer = await client.chat.completions.parse({ model, seed, max_tokens: 200,
      messages: [{ role: "user", content: "ROMEO:\nWho speaks?" }],
      response_format: { type: "json_schema",
                         json_schema: { name: "speaker", strict: true, schema } } });
    const parsed = answer.choices[0].message.parsed;
    assert.equal(answer.choices[0].finish_reason, "stop");
    assert.equal(typeof parsed.speaker, "string");
    assert.ok(["happy", "sad"].includes(parsed.mood), JSON.stringify(parsed));
  }
  const tools = [{ type: "function", function: { name: "call_nurse", strict: true,
    parameters: { type: "object", additionalProperties: false, required: ["reason"],
                  properties: { reason: { type: "string", maxLength: 20 } } } } }];
  const call = await client.chat.completions.parse({ model, seed: 4, max_tokens: 200, tools,
    tool_choice: "required", messages: [{ role: "user", content: "JULIET:\nNurse!" }] });
  const choice = call.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.tool_calls.length, 1);
  assert.equal(choice.message.tool_calls[0].function.name, "call_nurse");
  assert.equal(typeof choice.message.tool_calls[0].function.parsed_arguments.reason, "string");
});

// Asserts that `promise` rejects with the SDK's `errorClass`, `status` and
// (when given) error.param.
async function rejectsWith(promise, errorClass, status, param) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof OpenAI.APIError, `not an APIError: ${error}`);
    assert.ok(error instanceof errorClass, `${error.constructor.name}, not ${errorClass.name}`);
    assert.equal(error.status, status);
    assert.equal(typeof error.error?.message, "string", "no error.message");
    assert.equal(typeof error.type, "string", "no error.type");
    assert.equal(error.code, status, "error.code is not the HTTP status");
    if (param !== undefined) assert.equal(error.param, param);
    return true;
  });
}

const oneMessage = [{ role: "user", content: "Hello" }];
await check("n: 3 gives three choices, each the request alone with seed + index; n past --max_n is a 400 naming n",
  async () => {
    const many = await client.chat.completions.create({ model, messages: oneMessage, n: 3,
      seed: 5, max_tokens: 12 });
    assert.equal(many.choices.length, 3);
    for (const [i, choice] of many.choices.entries()) {
      assert.equal(choice.index, i);
      const alone = await client.chat.completions.create({ model, messages: oneMessage,
        seed: 5 + i, max_tokens: 12 });
      assert.equal(choice.message.content, alone.choices[0].message.content, `choice ${i}`);
    }
    const streamed = await client.chat.completions.create({ model, messages: oneMessage, n: 3,
      seed: 5, max_tokens: 12, stream: true });
    const texts = ["", "", ""];
    for await (const chunk of streamed) {
      for (const choice of chunk.choices) texts[choice.index] += choice.delta?.content ?? "";
    }
    assert.deepEqual(texts, many.choices.map((choice) => choice.message.content));
    await rejectsWith(client.chat.completions.create({ model, messages: oneMessage, n: 1000 }),
      OpenAI.BadRequestError, 400, "n");
  });

await check("temperature: 1000 is a 400 BadRequestError with param \"temperature\"", async () => {
  await rejectsWith(client.completions.create({ model, prompt: "ROMEO:", temperature: 1000 }),
    OpenAI.BadRequestError, 400, "temperature");
});

await check(`models.retrieve("${model}") is the model; another id is a 404 NotFoundError`,
  async () => {
    const retrieved = await client.models.retrieve(model);
    assert.equal(retrieved.id, model);
    assert.equal(retrieved.object, "model");
    await rejectsWith(client.models.retrieve("no-such-model"), OpenAI.NotFoundError, 404, "model");
  });

await check("sessions through the client's generic methods: create, continue, get, delete",
  async () => {
    const session = await client.post("/sessions", { body: { prompt: "ROMEO:" } });
    assert.equal(session.object, "session");
    assert.ok(session.position > 0);
    const turn = await client.completions.create({ model, prompt: " But soft,", max_tokens: 8,
      session_id: session.id });
    assert.equal(turn.session_id, session.id);
    const got = await client.get(`/sessions/${session.id}`);
    assert.equal(got.position, turn.session_position);
    assert.equal((await client.delete(`/sessions/${session.id}`)).deleted, true);
    await rejectsWith(client.get(`/sessions/${session.id}`), OpenAI.NotFoundError, 404);
  });

await check("an unknown session id is a 404 NotFoundError", async () => {
  const session_id = "0123456789abcdef0123456789abcdef";
  await rejectsWith(client.chat.completions.create({ model, messages: oneMessage, session_id }),
    OpenAI.NotFoundError, 404);
  await rejectsWith(client.chat.completions.create({ model, messages: oneMessage, session_id,
    stream: true }), OpenAI.NotFoundError, 404);
});

await check("an unknown model is a 404 NotFoundError", async () => {
  await rejectsWith(client.completions.create({ model: "no-such-model", prompt: "ROMEO:" }),
    OpenAI.NotFoundError, 404);
});

finish();
