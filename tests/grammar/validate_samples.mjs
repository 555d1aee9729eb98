// Validates grammar_sampling's generations with ajv (+ ajv-formats): each must be finished, parse
// as JSON and validate against its schema. The schemas are read from the same corpus the C++ side
// used (schema_corpus.h), so a schema changed on one side only fails here.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const file = process.argv[2];
if (!file) throw new Error('usage: validate_samples.mjs SAMPLES.jsonl');
const header = readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), 'schema_corpus.h'), 'utf8');
// The corpus is written as R"(...)" raw strings inside json::parse calls.
const schemas = [...header.matchAll(/json::parse\(R"\(([\s\S]*?)\)"\)/g)].map((m) => JSON.parse(m[1]));
if (schemas.length < 5) throw new Error(`found only ${schemas.length} schemas in schema_corpus.h`);

const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats(ajv);
const validators = schemas.map((s) => ajv.compile(s));
const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
let failures = 0;
const perSchema = new Map();
for (const [i, line] of lines.entries()) {
  const { schema, output, finished } = JSON.parse(line);
  perSchema.set(schema, (perSchema.get(schema) ?? 0) + 1);
  let problem = null;
  if (!finished) problem = 'unfinished (token cap)';
  let value;
  if (!problem) {
    try {
      value = JSON.parse(output);
    } catch (e) {
      problem = `not JSON: ${e.message}`;
    }
  }
  if (!problem && !validators[schema](value)) problem = ajv.errorsText(validators[schema].errors);
  if (problem) {
    failures++;
    if (failures <= 10) console.error(`generation ${i} (schema ${schema}): ${problem}\n  ${output.slice(0, 300)}`);
  }
}
console.log(`${lines.length} generations over ${perSchema.size} schemas: ${lines.length - failures} valid, ${failures} invalid`);
if (lines.length < 1000) {
  console.error(`expected at least 1000 generations, got ${lines.length}`);
  process.exit(1);
}
process.exit(failures === 0 ? 0 : 1);
