#!/usr/bin/env python3
"""Validates an Alertmanager POST /api/v2/alerts body against the OpenAPI
(Swagger 2.0) schema Alertmanager publishes: postableAlerts, with the
date-time formats checked too. Also checks what the schema cannot say:
firing alerts end in the future, resolved ones now or earlier.

usage: validate_alertmanager.py OPENAPI_YAML PAYLOAD_JSON firing|resolved
"""
import datetime
import json
import sys

import jsonschema
import yaml


def parse_time(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))


def main():
    spec_path, payload_path, state = sys.argv[1:4]
    with open(spec_path) as f:
        spec = yaml.safe_load(f)
    with open(payload_path) as f:
        payload = json.load(f)
    schema = {"$ref": "#/definitions/postableAlerts", "definitions": spec["definitions"]}
    jsonschema.validate(payload, schema)
    now = datetime.datetime.now(datetime.timezone.utc)
    for alert in payload:
        for key in ("startsAt", "endsAt"):
            if key in alert:
                parse_time(alert[key])  # raises on a malformed date-time
        ends = parse_time(alert["endsAt"])
        if state == "firing" and ends <= now:
            sys.exit("firing alert ends in the past: %s" % alert["endsAt"])
        if state == "resolved" and ends > now + datetime.timedelta(seconds=5):
            sys.exit("resolved alert ends in the future: %s" % alert["endsAt"])
        for k in ("alertname", "severity"):
            if k not in alert["labels"]:
                sys.exit("label %s missing" % k)
    print("ok: %d alert(s) valid against postableAlerts" % len(payload))


if __name__ == "__main__":
    main()
