#!/usr/bin/env node
// `npm start`: the service (API + worker, src/main.ts) from the compiled dist/, rebuilt
// first when a source is newer (bin/build.js). One node process, no loader: SIGTERM
// reaches it directly and drains requests.
'use strict';
// V8's code cache on disk (dist/.compile-cache): a warm start skips compiling the
// JavaScript of dist/ and node_modules again.
require('node:module').enableCompileCache?.(require('node:path').join(__dirname, '../dist/.compile-cache'));
try {
  require('./build').ensureBuilt();
} catch (err) {
  process.stderr.write(`billing: ${err.message}\n`);
  process.exit(1);
}
require('../dist/src/main.js');
