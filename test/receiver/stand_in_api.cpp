#include "stand_in_api.h"

#include <chrono>

namespace inbox::test {

StandInApi::StandInApi() {
  server_.Get(R"(/v1/events/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    std::function<void(const std::string&)> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back({id, req.get_header_value("Authorization")});
      hook = hook_;
    }
    if (hook) hook(id);
    Answer a = answer_for(id);
    if (a.delay_ms > 0) {
      // Interrupted when the stand-in stops, so a long delay never holds up the test's end.
      std::unique_lock<std::mutex> lock(mu_);
      stopped_cv_.wait_for(lock, std::chrono::milliseconds(a.delay_ms), [this] { return stopping_; });
    }
    res.status = a.status;
    if (!a.retry_after.empty()) res.set_header("Retry-After", a.retry_after);
    res.set_content(a.body.empty() ? "{\"error\":\"x\"}" : a.body, "application/json");
  });
  server_.Get("/v1/events", [this](const httplib::Request& req, httplib::Response& res) {
    ListCall call;
    for (const auto& [k, v] : req.params) call.params[k] = v;
    call.authorization = req.get_header_value("Authorization");
    std::function<Answer(const ListCall&)> handler;
    {
      std::lock_guard<std::mutex> lock(mu_);
      list_calls_.push_back(call);
      handler = list_handler_;
    }
    Answer a = handler ? handler(call) : Answer{404, "{}", "", 0};
    res.status = a.status;
    res.set_content(a.body.empty() ? "{}" : a.body, "application/json");
  });
  server_.set_tcp_nodelay(true);
  port_ = server_.bind_to_any_port("127.0.0.1");
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

StandInApi::~StandInApi() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stopped_cv_.notify_all();
  server_.stop();
  thread_.join();
}

std::string StandInApi::url_template() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/v1/events/{id}";
}

std::string StandInApi::list_url(const std::string& query) const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/v1/events?" + query;
}

void StandInApi::on_list(std::function<Answer(const ListCall&)> handler) {
  std::lock_guard<std::mutex> lock(mu_);
  list_handler_ = std::move(handler);
}

std::vector<StandInApi::ListCall> StandInApi::list_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return list_calls_;
}

void StandInApi::event(const std::string& id, const std::string& body) { always(id, {200, body, "", 0}); }

void StandInApi::always(const std::string& id, Answer a) {
  std::lock_guard<std::mutex> lock(mu_);
  always_[id] = std::move(a);
}

void StandInApi::script(const std::string& id, std::vector<Answer> answers) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& a : answers) scripted_[id].push_back(std::move(a));
}

void StandInApi::on_request(std::function<void(const std::string&)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hook_ = std::move(hook);
}

std::vector<StandInApi::Call> StandInApi::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

StandInApi::Answer StandInApi::answer_for(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto s = scripted_.find(id);
  if (s != scripted_.end() && !s->second.empty()) {
    Answer a = s->second.front();
    s->second.pop_front();
    return a;
  }
  auto it = always_.find(id);
  if (it != always_.end()) return it->second;
  return {404, "{\"error\":{\"type\":\"invalid_request_error\"}}", "", 0};
}

}  // namespace inbox::test
