// Starts `engage serve` with `args` (listening on a free port, stopped when its
// standard input closes) and resolves to the child and its base URL, read from
// the "listening on" log line. Shared by the browser tests.
import { spawn } from "node:child_process";

export async function startEngage(bin, args) {
  const child = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--exit-on-stdin-eof", ...args], {
    stdio: ["pipe", "ignore", "pipe"],
  });
  const base = await new Promise((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`engage did not start: ${log}`)), 30_000);
    child.stderr.on("data", (chunk) => {
      log += chunk;
      const m = log.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => reject(new Error(`engage exited with ${code}: ${log}`)));
  });
  return { child, base };
}

/** Ends a server started by `startEngage` and waits for it to exit. */
export async function stopEngage(child) {
  child.stdin.end();
  await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on("exit", resolve)));
}
