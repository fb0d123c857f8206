// Drives pg-boss through its Node API for bench/peers/run.sh:
//   node drive.mjs setup|w1|w2|w4 SECONDS CONCURRENCY
// prints events per second. The payload is the same 600-byte event as
// bench.payload() in SQL. Connection from INBOX_BENCH_DATABASE_URL.
import { randomUUID } from 'node:crypto'
import PgBoss from 'pg-boss'

const [workload, seconds = '8', concurrency = '8'] = process.argv.slice(2)
const boss = new PgBoss({
  connectionString: process.env.INBOX_BENCH_DATABASE_URL,
  max: Number(concurrency) + 1,
  supervise: false,
  schedule: false,
  migrate: workload === 'setup'
})
boss.on('error', (err) => console.error(err.message))

const payload = (n) => ({
  id: `evt_${n}`, type: 'invoice.paid', livemode: false,
  data: { object: { id: `in_${n}`, amount_paid: 4200, currency: 'eur', customer: `cus_${n % 997}`, lines: 'x'.repeat(400) } }
})

// One event: its id is the job id, pg-boss's only deduplication on insert
// (ON CONFLICT DO NOTHING: a re-delivery is dropped, not refreshed).
const step = {
  w1: async () => { // 100 events per call
    await boss.insert(Array.from({ length: 100 }, (_, g) => ({ name: 'bench', id: randomUUID(), data: payload(g) })))
    return 100
  },
  w2: async () => {
    await boss.send('bench', payload(1), { id: randomUUID() })
    return 1
  },
  w4: async () => { // fetch 100, complete them
    const jobs = await boss.fetch('bench', { batchSize: 100 })
    if (jobs.length) await boss.complete('bench', jobs.map((j) => j.id))
    return jobs.length
  }
}

await boss.start()
if (workload === 'setup') {
  await boss.createQueue('bench')
} else {
  const deadline = Date.now() + Number(seconds) * 1000
  let events = 0
  const loop = async () => { while (Date.now() < deadline) events += await step[workload]() }
  const started = Date.now()
  await Promise.all(Array.from({ length: Number(concurrency) }, loop))
  console.log((events / ((Date.now() - started) / 1000)).toFixed(1))
}
await boss.stop({ graceful: false, wait: true })
