# backend_cpu_ms SETUP MEASURED: runs the SQL (and psql meta-commands) of
# SETUP, then of MEASURED, in one psql session, and prints the CPU time in
# ms (user + system, from /proc/PID/stat) that session's backend spent on
# MEASURED. Without other sessions, WAL flushes or client round trips in the
# figure, it resolves changes of a few percent that throughput runs on this
# noisy machine cannot. The server must run on this machine; PGOPTIONS and
# the PG* variables reach psql. Sourced by the benches that use it.
backend_cpu_ms() {
  local out
  out=$(mktemp)
  psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
$1
SELECT pg_backend_pid() AS pid \gset
\setenv BENCH_PID :pid
\! awk '{print \$14 + \$15}' /proc/\$BENCH_PID/stat > $out.a
$2
\! awk '{print \$14 + \$15}' /proc/\$BENCH_PID/stat > $out.b
SQL
  echo $((($(cat "$out.b") - $(cat "$out.a")) * 1000 / $(getconf CLK_TCK)))
  rm -f "$out" "$out.a" "$out.b"
}
