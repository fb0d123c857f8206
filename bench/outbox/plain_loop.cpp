// The forwarder benchmark's baseline: the plain loop a team would write by
// hand. THREADS threads each read their share of bench_outbox.plain and POST
// every row's payload to URL over one keep-alive connection; with --mark each
// row is then marked sent (one autocommit UPDATE, like a completion). No
// lease, no signature, no retry: whatever fails is only counted.
//   outbox_plain_loop DATABASE_URL URL THREADS [--mark]
#include <httplib.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: outbox_plain_loop DATABASE_URL URL THREADS [--mark]\n");
    return 2;
  }
  const std::string db_url = argv[1], url = argv[2];
  const int threads = std::atoi(argv[3]);
  const bool mark = argc > 4 && std::strcmp(argv[4], "--mark") == 0;
  const size_t slash = url.find('/', url.find("://") + 3);
  const std::string origin = url.substr(0, slash), path = url.substr(slash);
  std::atomic<long> sent{0}, failed{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      PGconn* conn = PQconnectdb(db_url.c_str());
      if (PQstatus(conn) != CONNECTION_OK) {
        std::fprintf(stderr, "connect: %s", PQerrorMessage(conn));
        PQfinish(conn);
        failed += 1;
        return;
      }
      std::string q = "SELECT id, payload::text FROM bench_outbox.plain WHERE id % " + std::to_string(threads) +
                      " = " + std::to_string(t) + " ORDER BY id";
      PGresult* rows = PQexec(conn, q.c_str());
      httplib::Client client(origin);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      for (int r = 0; r < PQntuples(rows); ++r) {
        auto res = client.Post(path, PQgetvalue(rows, r, 1), "application/json");
        if (!res || res->status < 200 || res->status >= 300) {
          ++failed;
          continue;
        }
        ++sent;
        if (mark) {
          const char* id = PQgetvalue(rows, r, 0);
          PGresult* u = PQexecParams(conn, "UPDATE bench_outbox.plain SET sent_at = now() WHERE id = $1::bigint", 1,
                                     nullptr, &id, nullptr, nullptr, 0);
          PQclear(u);
        }
      }
      PQclear(rows);
      PQfinish(conn);
    });
  }
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("sent %ld failed %ld seconds %.3f rate %.1f\n", sent.load(), failed.load(), s, sent / s);
  return failed == 0 ? 0 : 1;
}
