// A proxy of ACP as a runner in Node.js would be one, for
// BenchmarkACPFrontEnd: it starts the agent (the command of its
// arguments), and passes every line of each side, parsed, through five
// handlers that call the next one, then writes it again as JSON.
import { spawn } from "node:child_process";
import readline from "node:readline";

const [command, ...args] = process.argv.slice(2);
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const handlers = Array.from({ length: 5 }, () => (message, next) => next(message));

function handle(message, i = 0) {
  return i === handlers.length ? message : handlers[i](message, (m) => handle(m, i + 1));
}

function pass(from, to) {
  const lines = readline.createInterface({ input: from, crlfDelay: Infinity });
  lines.on("line", (line) => {
    if (!to.write(JSON.stringify(handle(JSON.parse(line))) + "\n")) {
      lines.pause();
      to.once("drain", () => lines.resume());
    }
  });
  return lines;
}

pass(process.stdin, agent.stdin).on("close", () => agent.stdin.end());
pass(agent.stdout, process.stdout);
agent.on("exit", (code) => process.exit(code ?? 0));
