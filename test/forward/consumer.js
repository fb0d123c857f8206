// Consumer stand-in for the forwarder tests: verifies every request with the
// Standard Webhooks reference library (npm standardwebhooks, pinned in
// package.json) and deduplicates by webhook-id, as a real consumer should.
//   node consumer.js SECRET [FAIL_RATE] [--no-verify] [--quiet]
// Listens on 127.0.0.1 (a free port), prints {"port": N} first, then one JSON
// line per request: id, attempt, verified, status, applied (first 2xx of the id).
// FAIL_RATE (0..1): that share of verified requests is answered 503 at random.
// --no-verify answers every request (the benchmark's baseline sends unsigned
// ones); --quiet prints only the port.
'use strict';
const http = require('http');
const { Webhook } = require('standardwebhooks');

const secret = process.argv[2];
const failRate = Number(process.argv[3] || 0);
const verify = !process.argv.includes('--no-verify');
const quiet = process.argv.includes('--quiet');
const wh = new Webhook(secret);
const applied = new Set();

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let verified = !verify;
    if (verify) {
      try {
        wh.verify(body, req.headers);
        verified = true;
      } catch (e) {
        verified = false;
      }
    }
    const id = req.headers['webhook-id'];
    let status = 401;
    let first = false;
    if (verified) {
      status = Math.random() < failRate ? 503 : 200;
      if (status === 200 && !applied.has(id)) {
        applied.add(id);
        first = true;
      }
    }
    if (!quiet) process.stdout.write(JSON.stringify({
      id, attempt: req.headers['webhook-attempt'], replay: req.headers['x-inbox-replay'],
      verified, status, applied: first,
    }) + '\n');
    res.writeHead(status, { 'content-type': 'text/plain' });
    res.end(status === 200 ? 'ok' : 'no');
  });
});
server.keepAliveTimeout = 30000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
