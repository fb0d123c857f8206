// What each kind of target receives: the request body (and headers) for an
// alert. Pure functions, so tests check them byte for byte and against the
// Alertmanager OpenAPI schema.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "alerts/alert.h"

namespace inbox {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Slack incoming webhook: {"text": ...} with the severity, check, provider and summary.
std::string slack_payload(const Alert& a);

// Generic JSON webhook: {"type":"inbox.alert.firing","timestamp":...,"data":{...}}.
std::string webhook_payload(const Alert& a);

// Prometheus Alertmanager POST /api/v2/alerts: an array of one postableAlert.
// Firing: startsAt, and endsAt `hold_s` ahead (Alertmanager resolves an alert
// nobody re-sends); resolved: endsAt now.
std::string alertmanager_payload(const Alert& a, const std::string& generator_url, int hold_s);

// Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature:
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>") for `secret` ("whsec_<base64 key>").
// Empty when the secret is not valid base64.
HeaderList standard_webhooks_headers(const std::string& secret, const std::string& msg_id,
                                     std::int64_t timestamp, const std::string& body);

// The message id targets see for an alert (the same for every retry and replica).
std::string alert_message_id(const Alert& a);

}  // namespace inbox
