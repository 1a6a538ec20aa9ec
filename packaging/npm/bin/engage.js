#!/usr/bin/env node
'use strict';
// `engage` from the npm package: runs the bundled binary with the same arguments
// and standard streams, passes on the signals this process gets, and ends as it
// ends (its exit code, or the same signal).
const { spawn } = require('node:child_process');
const { binaryPath } = require('../index.js');

const child = spawn(binaryPath(), process.argv.slice(2), { stdio: 'inherit' });
const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
const forward = (signal) => child.kill(signal);
for (const signal of signals) process.on(signal, forward);

child.on('error', (error) => {
  console.error(`engage: ${error.message}`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  for (const s of signals) process.off(s, forward);
  if (signal) process.kill(process.pid, signal);
  else process.exit(code);
});
