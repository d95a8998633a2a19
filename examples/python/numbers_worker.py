# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""The odd/even demo's worker in Python with paho-mqtt, doing what
examples/numbers_worker.c does: it takes numbers from a topic (default
``numbers``, QoS 1, MQTT v5), accepts the even ones and fails the odd ones,
and asks mosquitto-dlq for a retry of each failure with a compact NACK and a
reason. A refused NACK is answered on $CONTROL/dlq/v1/response, sent to this
client alone.

stdout, one line per delivery:  processed N  |  failed N (attempt K)
stderr: readiness, refused NACKs and anything unexpected.

    python3 examples/python/numbers_worker.py --host HOST --port PORT [--topic T] [--id ID]

Needs paho-mqtt (Debian: apt install python3-paho-mqtt).
"""

import argparse
import re
import signal
import sys

import paho.mqtt.client as mqtt

import mosquitto_dlq as dlq

PROG = "numbers_worker.py"
NACK_REASON = "odd numbers are not accepted"


def warn(text):
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def on_connect(client, userdata, flags, reason_code, properties):
    if reason_code.value != 0:
        warn(f"connection refused: {reason_code}")
        return
    # Every connect subscribes: the session is clean.
    _, userdata["sub_mid"] = client.subscribe(userdata["topic"], qos=1)


def on_subscribe(client, userdata, mid, reason_codes, properties):
    if mid != userdata["sub_mid"]:
        return
    if reason_codes[0].value >= 0x80:
        warn(f"subscription to {userdata['topic']} refused: {reason_codes[0]}")
        return
    warn(f"subscribed to {userdata['topic']}")


def on_disconnect(client, userdata, *args):
    if not userdata["stopping"]:
        warn(f"connection lost ({dlq.disconnect_reason(*args)}), reconnecting")


def on_reply(message):
    for problem in dlq.reply_problems(message):
        warn(problem)


def on_message(client, userdata, message):
    if dlq.is_reply(message):
        on_reply(message)
        return
    # A whole decimal integer, as the C worker's strtol reads it.
    text = message.payload.decode("ascii", errors="replace")
    if not re.fullmatch(r"\s*[+-]?[0-9]+", text):
        warn(f"ignored a message on {message.topic} that is not a number")
        return
    n = int(text)
    if n % 2 == 0:
        print(f"processed {n}", flush=True)
        return
    try:
        attempt = dlq.attempt(message)
    except ValueError as e:
        warn(f"{e}")
        attempt = 1
    print(f"failed {n} (attempt {attempt})", flush=True)
    try:
        info = dlq.nack(client, message, NACK_REASON)
    except dlq.NotTrackedError as e:
        warn(f"{n}: cannot ask for a retry: {e}")
        return
    if info.rc != 0:
        warn(f"cannot send NACK for {n}: error {info.rc}")


def port_number(text):
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text}: not a port number (1-65535)")
    return int(text)


def stop(client, userdata):
    userdata["stopping"] = True
    client.disconnect()


def main():
    parser = argparse.ArgumentParser(prog=PROG, description="Accepts even numbers, NACKs odd ones.")
    parser.add_argument("--host", default="localhost", help="broker host (default localhost)")
    parser.add_argument("--port", type=port_number, default=1883, help="broker port (default 1883)")
    parser.add_argument("--topic", default="numbers", help="topic to subscribe to (default numbers)")
    parser.add_argument("--id", default="dlq-demo-worker", help="client id (default dlq-demo-worker)")
    args = parser.parse_args()

    userdata = {"topic": args.topic, "sub_mid": None, "stopping": False}
    client = dlq.new_client(args.id, userdata=userdata)
    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.on_disconnect = on_disconnect
    signal.signal(signal.SIGTERM, lambda signum, frame: stop(client, userdata))
    try:
        client.connect(args.host, args.port, keepalive=60, clean_start=True)
    except OSError as e:
        warn(f"cannot connect to {args.host}:{args.port}: {e}")
        return 1
    try:
        # Reconnects (and so subscribes again) when the connection drops;
        # returns after disconnect().
        client.loop_forever(retry_first_connection=False)
    except KeyboardInterrupt:
        stop(client, userdata)
    return 0


if __name__ == "__main__":
    sys.exit(main())
