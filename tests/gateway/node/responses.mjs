// The official openai Node SDK against a running costgate: the Responses API whole and
// streamed, with a function tool and previous_response_id, whole and streamed. Prints what it
// saw as one JSON object for tests/gateway/test_responses_node.py to check.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.COSTGATE_URL, apiKey: process.env.COSTGATE_KEY, maxRetries: 0 });
const model = process.env.COSTGATE_MODEL;
const tools = [{ type: "function", name: "get_weather", description: "Weather in a city", strict: false,
                 parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } }];

async function create(streamed, body) {
  if (!streamed) return client.responses.create({ model, tools, ...body });
  const stream = client.responses.stream({ model, tools, ...body });
  for await (const _event of stream) { /* the accumulator reads every event */ }
  return stream.finalResponse();
}

async function toolRoundTrip(streamed) {
  const first = await create(streamed, { input: "Weather in Oslo?", tool_choice: "required" });
  const call = first.output[0];
  const second = await create(streamed, { previous_response_id: first.id,
    input: [{ type: "function_call_output", call_id: call.call_id, output: "snowy" }] });
  return { type: call.type, name: call.name, args: JSON.parse(call.arguments), text: second.output_text,
           previous: second.previous_response_id, first: first.id };
}

const whole = await client.responses.create({ model, input: "hello from node" }).withResponse();
const stream = client.responses.stream({ model, input: "stream from node" });
const kinds = [];
for await (const event of stream) kinds.push(event.type);
const final = await stream.finalResponse();
console.log(JSON.stringify({
  whole: { text: whole.data.output_text, usage: whole.data.usage, cost: whole.response.headers.get("x-costgate-cost-usd"),
           cache: whole.response.headers.get("x-costgate-cache") },
  stream: { text: final.output_text, kinds, usage: final.usage },
  tools: await toolRoundTrip(false),
  streamedTools: await toolRoundTrip(true),
}));
