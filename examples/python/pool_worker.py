# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""A member of a worker pool in Python with paho-mqtt: one of several
processes that share the jobs of a shared subscription (default
``$share/workers/jobs/#``, QoS 1, MQTT v5), each with a persistent session of
its own, so that a job a worker crashed on stays in that worker's session,
is delivered to it again, and is counted by mosquitto-dlq's redelivery
tracking until it is dead-lettered. The client settings are those of
docs/worker-pool.md: a fixed client id, clean start
false on every connection, a session expiry interval of 3600 s, Receive
Maximum 1, and the subscription made again on every connection (a broker
restart gives the session back without its $share membership).

What it does with a job, by its payload, to show both protections:

- ``poison...``: the job fails: it is NACKed through $CONTROL/dlq/v1/nack
  with a reason, then acknowledged (a retry copy follows, until the policy's
  max_attempts make it a dead letter);
- ``crash...``: the process exits at once, with status 3, before the
  acknowledgement, as a worker that segfaults does;
- anything else: processed (printed) and acknowledged; with ``--ack`` also
  ACKed through $CONTROL/dlq/v1/ack once processed, before the
  acknowledgement.

paho sends a QoS 1 message's PUBACK when on_message returns (1.6 and 2.x,
without manual_ack), so a job is acknowledged only after it was handled.
The PUBACK is no ACK: a policy with an ack_timeout (e.g. ``ack_timeout=30s``)
needs ``--ack``, or each good job runs out and is retried as a failed
attempt; without it the worker only NACKs.

stdout, flushed, for each message before acting on it and after processing:
    received PAYLOAD delivery-count=N|- dlq-id=ID|-
    processed PAYLOAD
(delivery-count: dlq.delivery_count(), the plugin's count on Mosquitto 2.1,
its absence on a first delivery read as 1; 2.0 stamps none, so there it
reads 1 for every tracked message; - for an untracked one.)
stderr: each subscription (readiness), lost connections, anything unexpected.

    python3 examples/python/pool_worker.py --id worker-1 [--host HOST] [--port PORT]
        [--group workers] [--filter 'jobs/#'] [--ack]

Needs paho-mqtt 1.6 or 2.x (Debian: apt install python3-paho-mqtt).
"""

import argparse
import os
import signal
import sys
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

import mosquitto_dlq as dlq

PROG = "pool_worker.py"
NACK_REASON = "poison job"
SESSION_EXPIRY_S = 3600
CRASH_STATUS = 3


def warn(text):
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def say(text):
    print(text, flush=True)


def session_present(flags):
    # paho 1.6 passes a dict, paho 2.x an object.
    if isinstance(flags, dict):
        return bool(flags.get("session present"))
    return bool(getattr(flags, "session_present", False))


def on_connect(client, userdata, flags, reason_code, properties):
    if reason_code.value != 0:
        warn(f"connection refused: {reason_code}")
        return
    warn(f"connected (session present: {'yes' if session_present(flags) else 'no'})")
    # On every connection: a broker restart restores the session but not its
    # $share membership, and subscribing again to a filter the session holds
    # only replaces it.
    _, userdata["sub_mid"] = client.subscribe(userdata["subscription"], qos=1)


def on_subscribe(client, userdata, mid, reason_codes, properties):
    if mid != userdata["sub_mid"]:
        return
    if reason_codes[0].value >= 0x80:
        warn(f"subscription to {userdata['subscription']} refused: {reason_codes[0]}")
        return
    warn(f"subscribed to {userdata['subscription']}")


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
    job = message.payload.decode("utf-8", errors="replace")
    count = dlq.delivery_count(message) or "-"
    ident = dlq.user_property(message, dlq.PROP_ID) or "-"
    say(f"received {job} delivery-count={count} dlq-id={ident}")
    if job.startswith("crash"):
        # No PUBACK: the job stays in this worker's session.
        os._exit(CRASH_STATUS)
    if job.startswith("poison"):
        try:
            info = dlq.nack(client, message, NACK_REASON)
        except dlq.NotTrackedError as e:
            warn(f"{job}: cannot NACK: {e}")
            return
        if info.rc != 0:
            warn(f"cannot send NACK for {job}: error {info.rc}")
        return
    say(f"processed {job}")
    if userdata["ack"]:
        # After the work, before returning: the PUBACK, which the plugin
        # does not take for an ACK, goes when on_message returns.
        try:
            info = dlq.ack(client, message)
        except dlq.NotTrackedError as e:
            warn(f"{job}: cannot ACK: {e}")
            return
        if info.rc != 0:
            warn(f"cannot send ACK for {job}: error {info.rc}")
    # Returning acknowledges the job.


def port_number(text):
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text}: not a port number (1-65535)")
    return int(text)


def stop(client, userdata):
    userdata["stopping"] = True
    client.disconnect()


def main():
    parser = argparse.ArgumentParser(prog=PROG, description="A member of a worker pool on a shared subscription.")
    parser.add_argument("--host", default="localhost", help="broker host (default localhost)")
    parser.add_argument("--port", type=port_number, default=1883, help="broker port (default 1883)")
    parser.add_argument("--id", required=True, help="client id, fixed and one per worker (e.g. worker-1)")
    parser.add_argument("--group", default="workers", help="shared subscription group (default workers)")
    parser.add_argument("--filter", default="jobs/#", help="topic filter of the jobs (default jobs/#)")
    parser.add_argument("--ack", action="store_true",
                        help="ACK each job once it is processed: for a policy with an ack_timeout; "
                        "without it the worker only NACKs")
    args = parser.parse_args()

    subscription = f"$share/{args.group}/{args.filter}"
    userdata = {"subscription": subscription, "sub_mid": None, "stopping": False, "ack": args.ack}
    client = dlq.new_client(args.id, userdata=userdata)
    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.on_disconnect = on_disconnect
    client.reconnect_delay_set(min_delay=1, max_delay=5)
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = SESSION_EXPIRY_S
    props.ReceiveMaximum = 1
    signal.signal(signal.SIGTERM, lambda signum, frame: stop(client, userdata))
    # clean_start=False, not paho's default MQTT_CLEAN_START_FIRST_ONLY: that
    # starts clean on the first connection, throwing away the session and
    # the job this worker crashed on. paho keeps clean_start and the
    # properties for its reconnections.
    while True:
        if userdata["stopping"]:
            return 0
        try:
            client.connect(args.host, args.port, keepalive=60, clean_start=False, properties=props)
            break
        except OSError as e:
            # A broker that is restarting: try again, as a reconnection does.
            warn(f"cannot connect to {args.host}:{args.port}: {e}; trying again")
            time.sleep(1)
    try:
        # Reconnects (and so subscribes again) when the broker goes away;
        # returns after disconnect().
        client.loop_forever()
    except KeyboardInterrupt:
        stop(client, userdata)
    return 0


if __name__ == "__main__":
    sys.exit(main())
