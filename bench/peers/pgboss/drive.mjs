// Drives pg-boss through its Node API for bench/peers/run.sh:
//   node drive.mjs setup|w1|w2|w4 SECONDS CONCURRENCY
// prints events per second, counted in the database (jobs written by w1/w2,
// jobs completed by w4), not by the client. The payload is the same 600-byte
// event as bench.payload() in SQL. Connection from INBOX_BENCH_DATABASE_URL.
import { createHash, randomUUID } from 'node:crypto'
import PgBoss from 'pg-boss'

const [workload, seconds = '8', concurrency = '8'] = process.argv.slice(2)
const clients = Number(concurrency)
const boss = new PgBoss({
  connectionString: process.env.INBOX_BENCH_DATABASE_URL,
  // One connection per async loop, as pgbench opens one per client.
  max: Math.max(clients, 1),
  // No background work inside a timed run: maintenance (archive, expire),
  // cron and state monitoring stay off (monitoring is off by default).
  supervise: false,
  schedule: false,
  migrate: workload === 'setup'
})
boss.on('error', (err) => console.error(err.message))
const queue = 'bench'

const payload = (n) => ({
  id: `evt_${n}`, type: 'invoice.paid', livemode: false,
  data: { object: { id: `in_${n}`, amount_paid: 4200, currency: 'eur', customer: `cus_${n % 997}`, lines: 'x'.repeat(400) } }
})

// pg-boss's only deduplication: the job id. A caller derives it from the
// provider's event id; pg-boss inserts with ON CONFLICT DO NOTHING, so a
// re-delivery is dropped (never refreshed, and once the job is archived a
// late retry is a new job). populate.sql derives the backlog's ids the same
// way: md5('bench/' || external_id)::uuid.
const jobId = (externalId) => {
  const h = createHash('md5').update(`bench/${externalId}`).digest('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

const step = {
  w1: async () => { // 100 events in one insert (one statement, one transaction)
    const batch = randomUUID()
    await boss.insert(Array.from({ length: 100 }, (_, i) => ({
      name: queue, id: jobId(`b-${batch}-${i + 1}`), data: payload(i + 1)
    })))
    return 100
  },
  w2: async () => {
    await boss.send(queue, payload(1), { id: jobId(`one-${randomUUID()}`) })
    return 1
  },
  w4: async () => { // fetch 100 (SKIP LOCKED), complete them
    const jobs = await boss.fetch(queue, { batchSize: 100 })
    if (!jobs.length) return 0 // an empty queue, or a fetch error pg-boss swallows
    const { affected } = await boss.complete(queue, jobs.map((j) => j.id))
    return affected
  }
}

// Counted in the database before and after: what w1/w2 wrote, what w4 completed.
const counted = async () => {
  const sql = workload === 'w4'
    ? `SELECT count(*) FROM pgboss.job WHERE name = $1 AND state = 'completed'`
    : 'SELECT count(*) FROM pgboss.job WHERE name = $1'
  const { rows } = await boss.getDb().executeSql(sql, [queue])
  return Number(rows[0].count)
}

await boss.start()
if (workload === 'setup') {
  await boss.createQueue(queue) // policy standard: no singleton or throttling index in play
} else {
  if (!step[workload]) throw new Error(`unknown workload ${workload}`)
  // Open every pool connection before the clock starts (pgbench connects first too).
  await Promise.all(Array.from({ length: clients }, () => boss.getDb().executeSql('SELECT pg_sleep(0.05)')))
  const before = await counted()
  const deadline = Date.now() + Number(seconds) * 1000
  let client = 0
  let empty = 0
  const loop = async () => {
    while (Date.now() < deadline) {
      const n = await step[workload]() // not `client += await ...`: that reads client before the await
      client += n
      if (n === 0) empty++
    }
  }
  const started = Date.now()
  await Promise.all(Array.from({ length: clients }, loop))
  const elapsed = (Date.now() - started) / 1000
  const events = (await counted()) - before
  if (events !== client || empty) console.error(`pg-boss ${workload}: client counted ${client}, database ${events}, empty fetches ${empty}`)
  console.log((events / elapsed).toFixed(1))
}
await boss.stop({ graceful: false, wait: true })
