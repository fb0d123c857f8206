// The check behind the pg-boss column (README): pg-boss's own insert
// statements as pgbench scripts, with the parameters drive.mjs's send() and
// insert() bind, so the same SQL can run without Node beside drive.mjs.
//   node statements.mjs send|insert > script.sql; pgbench -f script.sql ...
// Needs bench.payload() and the pgboss schema with queue 'bench' (run.sh's setup).
import { createRequire } from 'node:module'

const plans = createRequire(import.meta.url)('pg-boss/src/plans.js')
const which = process.argv[2]
const bind = (sql, values, count) => { // $19 before $1
  for (let i = count; i >= 1; i--) sql = sql.replaceAll(`$${i}`, values[i] ?? 'NULL')
  return sql
}
const sql = which === 'send'
  // send(queue, payload, { id }): id, name, data, priority '0', singleton offset '0'; the rest NULL
  ? bind(plans.insertJob('pgboss'), { 1: "md5('bench/one-' || :n)", 2: "'bench'", 3: 'bench.payload(1)::text', 4: "'0'", 8: "'0'" }, 19)
  : which === 'insert'
    // insert(100 jobs): the jobs as JSON, the constructor's defaults NULL
    ? bind(plans.insertJobs('pgboss'), {
      1: "(SELECT json_agg(json_build_object('name', 'bench', 'id', md5('bench/b-' || :n || '-' || g)::uuid, 'data', bench.payload(g))) FROM generate_series(1, 100) g)"
    }, 6)
    : null
if (!sql) throw new Error('usage: node statements.mjs send|insert')
console.log('\\set n random(1, 9000000000000000000)')
console.log(sql.replace(/\s*\n\s*/g, ' ').trim() + ';')
