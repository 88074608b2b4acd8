// A local stand-in for OpenAI's Responses API and Anthropic's Messages API, for running the
// README's example as written with no provider network: POST /v1/responses answers a Response,
// POST /v1/messages an Anthropic Message, each with usage. Prints its port on the first line.
//   node test/fake-providers.mjs
import http from "node:http";

const answers = {
  "/v1/responses": () => ({
    id: "resp_readme_1", object: "response", created_at: Math.floor(Date.now() / 1000), status: "completed",
    model: "gpt-5", output: [{
      type: "message", id: "msg_readme_1", role: "assistant", status: "completed",
      content: [{ type: "output_text", text: "Your order left the warehouse today.", annotations: [] }],
    }],
    usage: { input_tokens: 30, output_tokens: 9, total_tokens: 39,
             input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
  }),
  "/v1/messages": () => ({
    id: "msg_01readme", type: "message", role: "assistant", model: "claude-sonnet-5",
    content: [{ type: "text", text: "It should arrive on Thursday." }],
    stop_reason: "end_turn", stop_sequence: null,
    usage: { input_tokens: 44, output_tokens: 8 },
  }),
};

const server = http.createServer((request, response) => {
  let body = "";
  request.on("data", (chunk) => { body += chunk; });
  request.on("end", () => {
    const answer = request.method === "POST" && answers[request.url];
    let parsed = null;
    try { parsed = JSON.parse(body); } catch { /* answered 400 below */ }
    if (!answer || !parsed || typeof parsed.model !== "string") {
      response.writeHead(400, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { message: `unexpected ${request.method} ${request.url}` } }));
      return;
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify(answer()));
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
