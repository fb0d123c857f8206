// A local stand-in for a provider's "get event" API (GET /v1/events/{id}) and
// "list events" API (GET /v1/events?...) on 127.0.0.1: the only thing the
// backfill tests fake.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace inbox::test {

class StandInApi {
 public:
  struct Answer {
    int status = 200;
    std::string body;
    std::string retry_after;  // Retry-After header, when set
    int delay_ms = 0;         // wait before answering (timeouts); cut short when the stand-in stops
  };
  struct Call {
    std::string id;  // as the server decoded it from the path
    std::string authorization;
  };

  StandInApi();
  ~StandInApi();
  StandInApi(const StandInApi&) = delete;
  StandInApi& operator=(const StandInApi&) = delete;

  int port() const { return port_; }
  std::string url_template() const;  // http://127.0.0.1:PORT/v1/events/{id}

  // Answers 200 with `body` for `id`, every time.
  void event(const std::string& id, const std::string& body);
  // Answers `a` for `id` every time (after any scripted answers).
  void always(const std::string& id, Answer a);
  // The next answers for `id`, in order, before the permanent one.
  void script(const std::string& id, std::vector<Answer> answers);
  // Called with the id before each answer, outside the lock.
  void on_request(std::function<void(const std::string&)> hook);
  std::vector<Call> calls() const;

  // One GET /v1/events: its decoded query parameters and auth header.
  struct ListCall {
    std::map<std::string, std::string> params;
    std::string authorization;
  };
  // http://127.0.0.1:PORT/v1/events?QUERY
  std::string list_url(const std::string& query) const;
  // Answers every list call (default: 404).
  void on_list(std::function<Answer(const ListCall&)> handler);
  std::vector<ListCall> list_calls() const;

 private:
  Answer answer_for(const std::string& id);

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable stopped_cv_;
  bool stopping_ = false;
  std::map<std::string, Answer> always_;  // unknown ids: 404
  std::map<std::string, std::deque<Answer>> scripted_;
  std::function<void(const std::string&)> hook_;
  std::vector<Call> calls_;
  std::function<Answer(const ListCall&)> list_handler_;
  std::vector<ListCall> list_calls_;
};

}  // namespace inbox::test
