// Lints an OpenAPI document with Redocly (@redocly/openapi-core is ESM-only, and the
// jest runtime here loads CommonJS): reads {doc, extends, rules} as JSON on stdin and
// writes the problems as JSON lines "severity ruleId: message at pointer" on stdout.
import { createConfig, lintFromString } from '@redocly/openapi-core';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { doc, extends: presets, rules } = JSON.parse(input);
const config = await createConfig({ extends: presets, rules });
const problems = await lintFromString({ source: JSON.stringify(doc), absoluteRef: '/v1/openapi.json', config });
process.stdout.write(JSON.stringify(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`)));
