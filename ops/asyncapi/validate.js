// The official AsyncAPI parser (npm @asyncapi/parser) on docs/asyncapi.yaml, its $refs to schemas/v1 resolved.
//   cd ops/asyncapi && npm install && node validate.js ../../docs/asyncapi.yaml
// Exit 0 when the document parses with no error-level diagnostic.
const { Parser, fromFile } = require('@asyncapi/parser');
(async () => {
  const parser = new Parser();
  const { document, diagnostics } = await fromFile(parser, process.argv[2]).parse();
  const errors = diagnostics.filter(d => d.severity === 0);
  for (const d of diagnostics) console.log(d.severity, d.code, d.message, JSON.stringify(d.path));
  console.log(JSON.stringify({ok: !!document && errors.length === 0, errors: errors.length, diagnostics: diagnostics.length,
    channels: document ? document.channels().length : null, messages: document ? document.allMessages().length : null}));
  process.exit(document && errors.length === 0 ? 0 : 1);
})();
