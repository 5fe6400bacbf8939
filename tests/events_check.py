#!/usr/bin/env python3
"""Checks captured stockd events against docs/asyncapi.json, with third-party parsers.

Why: the events are a contract with subscribers stockd does not know, so what it
publishes must be judged by code that is not stockd's: each event is parsed by
the CloudEvents project's own SDK (PyPI `cloudevents`, structured JSON mode) and
validated by `jsonschema` against the AsyncAPI message whose name is the
event's type. Both are pinned and installed by
`scripts/test-tools.sh events-checker`.

Usage: events_check.py <asyncapi.json> <captured.json>
  captured.json: a JSON array of broker messages, each
  {"routing_key": str, "content_type": str, "message_id": str|null, "body": str}.
Prints one line per error, then a summary line; exits 1 on any error, 0 when
none, 2 on a usage error or an empty capture.
"""

import json
import sys

from cloudevents.core.bindings.rabbitmq import RabbitMQMessage, from_structured
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from jsonschema import Draft7Validator
from referencing import Registry
from referencing.jsonschema import DRAFT7

SINGLE = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
DOC_URI = "urn:stockd:asyncapi"


def validators(doc):
    """One draft-07 validator per message name, its $refs resolved within the whole document."""
    registry = Registry().with_resource(DOC_URI, DRAFT7.create_resource(doc))
    return {
        message["name"]: Draft7Validator(
            {"$ref": f"{DOC_URI}#/components/messages/{key}/payload"}, registry=registry
        )
        for key, message in doc["components"]["messages"].items()
    }


def check_event(event, routing_key, by_type):
    """Returns what is wrong with one event (a dict from the body): a list of strings."""
    if not isinstance(event, dict):
        return [f"not a JSON object: {json.dumps(event)[:80]}"]
    errors = []
    # The SDK parses the event as a subscriber would: structured mode, JSON format.
    wire = RabbitMQMessage(headers={}, content_type=SINGLE, body=json.dumps(event).encode())
    try:
        from_structured(wire, JSONFormat(), CloudEvent)  # raises on what the SDK refuses
    except Exception as e:  # the SDK's validation errors, the time parser's
        errors.append(f"cloudevents SDK: {type(e).__name__}: {e}")
    if event.get("type") != routing_key:
        errors.append(f"type {event.get('type')!r} differs from routing key {routing_key!r}")
    if event.get("specversion") != "1.0":
        errors.append(f"specversion {event.get('specversion')!r} is not '1.0'")
    if not isinstance(event.get("id"), str) or not event["id"]:
        errors.append("id is missing or empty")
    validator = by_type.get(event.get("type"))
    if validator is None:
        return errors + [f"unknown type {event.get('type')!r}: no such message in the AsyncAPI document"]
    schema_errors = sorted(validator.iter_errors(event), key=lambda e: list(map(str, e.absolute_path)))
    for e in schema_errors:
        where = "/".join(str(p) for p in e.absolute_path) or "(event)"
        errors.append(f"schema: {where}: {e.message}")
    if not schema_errors:  # what a schema cannot say: subject and id name the event's own data
        data = event["data"]
        if event["type"].startswith("stockd.order."):
            subject = f"orders/{data['order_id']}"
        else:
            subject = f"skus/{data['sku_id']}"
        if event["type"].startswith("stockd.reservation."):
            subject += f"/reservations/{data['request_id']}"
        id_prefix = f"{subject}#"
        if event["type"] == "stockd.sku.adjusted":
            id_prefix = f"{subject}/movements/{data['movement_id']}#"
        if event["subject"] != subject:
            errors.append(f"subject {event['subject']!r} does not match data (expected {subject!r})")
        if not event["id"].startswith(id_prefix):
            errors.append(f"id {event['id']!r} does not match data (expected {id_prefix}...)")
    return errors


def check_message(message, by_type):
    """Returns (events in the message, [(event id, error)])."""
    fields = {"routing_key": str, "content_type": str, "body": str}
    if not isinstance(message, dict) or any(not isinstance(message.get(k), t) for k, t in fields.items()):
        return 0, [(None, "capture entry lacks a string routing_key, content_type or body")]
    try:
        body = json.loads(message["body"])
    except ValueError as e:
        return 0, [(None, f"body is not JSON: {e}")]
    content_type = message["content_type"]
    if content_type == SINGLE:
        if not isinstance(body, dict):
            return 0, [(None, f"{SINGLE} body is not a JSON object")]
        events = [body]
    elif content_type == BATCH:
        if not isinstance(body, list) or not body:
            return 0, [(None, f"{BATCH} body is not a non-empty JSON array")]
        events = body
    else:
        return 0, [(None, f"content type {content_type!r} is neither {SINGLE} nor {BATCH}")]
    errors = []
    for event in events:
        event_id = event.get("id") if isinstance(event, dict) else None
        errors += [(event_id, e) for e in check_event(event, message["routing_key"], by_type)]
    return len(events), errors


def main(argv):
    if len(argv) != 3:
        print("usage: events_check.py <asyncapi.json> <captured.json>", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            by_type = validators(json.load(f))
        with open(argv[2]) as f:
            captured = json.load(f)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"events_check: cannot read the inputs: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if not isinstance(captured, list) or not captured:
        print("events_check: the capture is not a non-empty JSON array of messages", file=sys.stderr)
        return 2
    events = errors = 0
    for index, message in enumerate(captured):
        count, found = check_message(message, by_type)
        events += count
        for event_id, error in found:
            print(f"message {index} event {event_id or '-'}: {error}")
        errors += len(found)
    print(f"events_check: {events} events in {len(captured)} messages, {errors} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
