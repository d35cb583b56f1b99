// Checks docs/openapi.yaml's patterns in ECMA-262 with the u flag, as
// JSON Schema reads them (Node).
//
// Usage: node specpatterns.js OPENAPI_JSON CORPUS_JSON. Every "pattern"
// keyword of the served description must compile and, for each value of
// its corpus (made by internal/httpapi's
// TestSpecPatternsMeanTheSameInEveryEngine), match exactly when the
// server accepts the value. Prints each disagreement; exits 1 if there is
// any.
'use strict';
const fs = require('fs');

function* patterns(node, at) {
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) yield* patterns(node[i], `${at}/${i}`);
  } else if (node !== null && typeof node === 'object') {
    for (const [key, sub] of Object.entries(node)) {
      const where = `${at}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
      if (key === 'pattern' && typeof sub === 'string') yield [where, sub];
      else yield* patterns(sub, where);
    }
  }
}

const [spec, corpus] = process.argv.slice(2, 4).map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
let problems = 0;
for (const [where, pattern] of [...patterns(spec, '')].sort()) {
  let re;
  try {
    re = new RegExp(pattern, 'u');
  } catch (e) {
    console.log(`${where}: RegExp cannot compile it with the u flag: ${e.message}`);
    problems++;
    continue;
  }
  const entry = corpus[where];
  if (entry === undefined || entry.pattern !== pattern || !entry.values || entry.values.length === 0) {
    console.log(`${where}: the corpus has no values for this pattern`);
    problems++;
    continue;
  }
  let wrong = 0;
  entry.values.forEach((value, i) => {
    const matched = re.test(value);
    if (matched !== entry.expected[i]) {
      if (++wrong <= 5) {
        console.log(`${where}: ${JSON.stringify(value)}: RegExp matches it: ${matched}, the server accepts it: ${entry.expected[i]}`);
      }
    }
  });
  if (wrong) {
    console.log(`${where}: ${wrong} of ${entry.values.length} values disagree`);
    problems++;
  }
}
process.exit(problems ? 1 : 0);
