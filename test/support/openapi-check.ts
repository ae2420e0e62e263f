// Every response a test receives through call() is checked against the OpenAPI
// document the server itself publishes (GET /v1/openapi.json): the success schema
// of the matching operation for its documented status, or the Problem schema for
// errors. A mismatch throws, so the test that made the request fails.
import Ajv2020, { ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

type Json = Record<string, unknown>;

interface Route {
  method: string;
  path: string;
  pattern: RegExp;
  literalSegments: number;
  operationId: string;
  responses: Record<string, Json>;
}

interface Doc {
  openapi: Json;
  routes: Route[];
  problem: ValidateFunction;
  validators: Map<string, ValidateFunction>;
  ajv: Ajv2020;
}

const docs = new Map<string, Promise<Doc | null>>();
const DOC_ID = 'openapi-document';

function compileDoc(openapi: Json): Doc {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  addFormats(ajv);
  const components = (openapi.components as { schemas?: Record<string, Json> } | undefined)?.schemas ?? {};
  const problem = ajv.compile(components.Problem ?? { type: 'object' });
  // The document's components, so that error schemas can $ref them (#/components/schemas/...).
  ajv.addSchema({ $id: DOC_ID, components: { schemas: components } });
  const routes: Route[] = [];
  for (const [path, methods] of Object.entries((openapi.paths ?? {}) as Record<string, Record<string, Json>>)) {
    const segments = path.split('/');
    const pattern = new RegExp('^' + segments.map((s) => (s.startsWith('{') ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/') + '$');
    for (const [method, op] of Object.entries(methods)) {
      routes.push({
        method: method.toUpperCase(), path, pattern,
        literalSegments: segments.filter((s) => !s.startsWith('{')).length,
        operationId: String(op.operationId), responses: (op.responses ?? {}) as Record<string, Json>,
      });
    }
  }
  // Literal segments win over parameters (/members/lookup before /members/{id}), as in the router.
  routes.sort((a, b) => b.literalSegments - a.literalSegments);
  return { openapi, routes, problem, validators: new Map(), ajv };
}

async function loadDoc(base: string): Promise<Doc | null> {
  let cached = docs.get(base);
  if (!cached) {
    cached = (async () => {
      try {
        const res = await fetch(`${base}/v1/openapi.json`);
        if (!res.ok) return null;
        const json = (await res.json()) as Json;
        return typeof json.openapi === 'string' ? compileDoc(json) : null;
      } catch {
        return null; // not an API server (e.g. a test's webhook receiver)
      }
    })();
    docs.set(base, cached);
  }
  return cached;
}

/** Follows a local $ref (#/components/...) of the document. */
function deref(doc: Doc, node: Json | undefined): Json | undefined {
  let at: Json | undefined = node;
  for (let hops = 0; at && typeof at.$ref === 'string' && hops < 10; hops++) {
    const ref: string = at.$ref;
    at = ref.slice(2).split('/').reduce<unknown>((o, k) => (o as Json | undefined)?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc.openapi) as Json | undefined;
  }
  return at;
}

/** The validator of a documented schema, whose $refs point into the document's components. */
function validatorFor(doc: Doc, key: string, schema: Json): ValidateFunction {
  let validate = doc.validators.get(key);
  if (!validate) {
    const rebased = JSON.parse(JSON.stringify(schema).replace(/"#\/components\//g, `"${DOC_ID}#/components/`)) as Json;
    validate = doc.ajv.compile(rebased);
    doc.validators.set(key, validate);
  }
  return validate;
}

function describeErrors(v: ValidateFunction): string {
  return (v.errors ?? []).slice(0, 8).map((e) => `  ${e.instancePath || '(root)'} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`).join('\n');
}

/** Throws when the response does not match what the OpenAPI document promises. */
export async function checkResponse(base: string, method: string, url: string, status: number, contentType: string | null, body: unknown, text: string): Promise<void> {
  const pathname = new URL(url, base).pathname;
  if (!pathname.startsWith('/v1/')) return;
  const doc = await loadDoc(base);
  if (!doc) return;
  const route = doc.routes.find((r) => r.method === method.toUpperCase() && r.pattern.test(pathname));
  if (!route) return;
  const where = `${method.toUpperCase()} ${pathname} (${route.operationId}) answered ${status}`;
  const fail = (why: string) => {
    throw new Error(`OpenAPI mismatch: ${where}: ${why}\nbody: ${text.slice(0, 1000)}`);
  };
  if (status >= 400) {
    if (!/^application\/problem\+json/.test(contentType ?? '')) fail(`error content-type is ${contentType}, expected application/problem+json`);
    if (!doc.problem(body)) fail(`body is not a Problem:\n${describeErrors(doc.problem)}`);
    if ((body as { status?: unknown }).status !== status) fail(`problem.status ${(body as { status?: unknown }).status} differs from the HTTP status`);
    // An operation that lists its client errors must list this one, and its code must
    // be one that status documents.
    const listsErrors = Object.keys(route.responses).some((s) => /^4\d\d$/.test(s));
    const documentedError = deref(doc, route.responses[String(status)]);
    if (listsErrors && status < 500 && !documentedError) {
      fail(`status ${status} is not documented (documented: ${Object.keys(route.responses).join(', ')})`);
    }
    const errorSchema = (documentedError?.content as Record<string, { schema?: Json }> | undefined)?.['application/problem+json']?.schema;
    if (errorSchema) {
      const validate = validatorFor(doc, `${route.method} ${route.path} ${status}`, errorSchema);
      if (!validate(body)) fail(`problem does not match the documented ${status} response:\n${describeErrors(validate)}`);
    }
    return;
  }
  const documented = route.responses[String(status)];
  if (!documented) fail(`status ${status} is not documented (documented: ${Object.keys(route.responses).join(', ')})`);
  const content = documented.content as Record<string, { schema?: Json }> | undefined;
  const media = (contentType ?? '').split(';')[0].trim();
  // A document (a PDF): the documented media type is checked here, its bytes by the test.
  if (content && !content['application/json'] && Object.keys(content).length > 0) {
    if (!content[media]) fail(`content-type is ${contentType}, expected ${Object.keys(content).join(' or ')}`);
    return;
  }
  const schema = content?.['application/json']?.schema;
  if (!schema) {
    if (text !== '') fail('a body was sent but the document describes none');
    return;
  }
  const validate = validatorFor(doc, `${route.method} ${route.path} ${status}`, schema);
  if (!validate(body)) fail(`body does not match the documented schema:\n${describeErrors(validate)}`);
}
