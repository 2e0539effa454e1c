// A client of `blaise-agent acp` built on the official ACP TypeScript SDK
// (@agentclientprotocol/sdk), as an editor would use it. Run by
// cmd/blaise-agent/acp_test.go (TestAcp_TypeScriptSDKClient):
//
//   node client.mjs BLAISE_AGENT CONFIG STATE_DIR CWD
//
// 1. spawns `blaise-agent acp -c CONFIG --state-dir STATE_DIR`, initializes
//    (loadSession must be on), opens a session, sends a prompt whose
//    permission request it allows, closes the agent's stdin and waits for
//    the process to exit 0: the session pauses (L9);
// 2. spawns it again, loads the paused session (its history is replayed),
//    prompts once more, and closes.
//
// It prints one line, `RESULT <json>`, for the Go test to check the store.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [bin, config, stateDir, cwd] = process.argv.slice(2);
if (!bin || !config || !stateDir || !cwd) {
  console.error("usage: node client.mjs BLAISE_AGENT CONFIG STATE_DIR CWD");
  process.exit(2);
}

function check(cond, what) {
  if (!cond) {
    throw new Error(`check failed: ${what}`);
  }
}

function textOf(update) {
  const u = update.update ?? update;
  if ((u.sessionUpdate === "agent_message_chunk" || u.sessionUpdate === "user_message_chunk") && u.content?.type === "text") {
    return (u.sessionUpdate === "user_message_chunk" ? "> " : "") + u.content.text;
  }
  return null;
}

// connect spawns `blaise-agent acp` and runs op with a ClientContext; it
// resolves with op's result once the process has exited.
async function connect(op) {
  const child = spawn(bin, ["acp", "-c", config, "--state-dir", stateDir], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  const updates = [];
  const permissions = [];
  const app = acp
    .client({ name: "blaise-agent-ts-test" })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      permissions.push(params);
      const allow = params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
    });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const result = await app.connectWith(stream, (ctx) => op(ctx, { updates, permissions }));
  // The client disconnects: stdin closes (connectWith may have closed it).
  if (!child.stdin.destroyed && !child.stdin.writableEnded) {
    child.stdin.end();
  }
  const { code, signal } = await exited;
  check(code === 0, `blaise-agent acp exited with ${code ?? signal}`);
  return result;
}

async function initialize(ctx) {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "blaise-agent-ts-test", version: "0.0.0" },
  });
  check(init.protocolVersion === 1, `protocolVersion ${init.protocolVersion}`);
  check(init.agentCapabilities?.loadSession === true, "agentCapabilities.loadSession is on");
  return init;
}

// 1. A new session with a permission request.
const first = await connect(async (ctx, seen) => {
  await initialize(ctx);
  const session = await ctx.buildSession(cwd).start();
  const sessionId = session.sessionId;
  check(/^[a-z0-9]{12}$/.test(sessionId), `session id ${sessionId} is a blaise session id`);
  const texts = [];
  const done = session.prompt("hello\n/permission");
  for (;;) {
    const msg = await session.nextUpdate();
    if (msg.kind === "stop") {
      check(msg.stopReason === "end_turn", `stopReason ${msg.stopReason}`);
      break;
    }
    check(msg.notification.sessionId === sessionId, "updates name the session");
    const t = textOf(msg.notification);
    if (t !== null) texts.push(t);
  }
  await done;
  session.dispose();
  check(seen.permissions.length === 1, `${seen.permissions.length} permission requests`);
  check(seen.permissions[0].sessionId === sessionId, "the permission request names the session");
  check(texts.join("|") === "echo: hello|permission: allow_once", `texts ${JSON.stringify(texts)}`);
  return { sessionId, texts };
});

// 2. The session paused when the client left; load it.
const second = await connect(async (ctx, seen) => {
  await initialize(ctx);
  await ctx.request(acp.methods.agent.session.load, {
    sessionId: first.sessionId,
    cwd,
    mcpServers: [],
  });
  const replay = seen.updates.filter((u) => u.sessionId === first.sessionId).map(textOf).filter((t) => t !== null);
  check(
    replay.join("|") === "> hello\n/permission|echo: hello|permission: allow_once",
    `replay ${JSON.stringify(replay)}`,
  );
  seen.updates.length = 0;
  const resp = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: first.sessionId,
    prompt: [{ type: "text", text: "after load" }],
  });
  check(resp.stopReason === "end_turn", `stopReason ${resp.stopReason}`);
  const texts = seen.updates.map(textOf).filter((t) => t !== null);
  check(texts.join("|") === "echo: after load", `texts ${JSON.stringify(texts)}`);
  return { replay, texts };
});

console.log("RESULT " + JSON.stringify({ sessionId: first.sessionId, first: first.texts, replay: second.replay, second: second.texts }));
