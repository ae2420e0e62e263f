// Preloaded (NODE_OPTIONS=--require) by test/build/compiled-build.test.ts into every
// node process the command starts: a process run by tsx, or one that loads tsx or
// esbuild, fails, so the test proves the compiled CLI runs with plain node.
'use strict';
const Module = require('node:module');
if ([...process.execArgv, ...process.argv.slice(1)].some((a) => /(^|[/\\])tsx([/\\]|$)|node_modules[/\\]tsx/.test(a) || a === 'tsx')) {
  process.stderr.write(`ran through tsx: ${[...process.execArgv, ...process.argv].join(' ')}\n`);
  process.exit(3);
}
const load = Module._load;
Module._load = function (request, ...rest) {
  if (/^(tsx|esbuild)(\/|$)/.test(request)) throw new Error(`loaded ${request}: the compiled CLI must run without tsx`);
  return load.call(this, request, ...rest);
};
