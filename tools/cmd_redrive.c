/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl redrive TOPIC: reads dead letters from a persistent session
 * subscribed (QoS 1) to TOPIC and republishes each to its origin-topic,
 * payload unchanged, with its own properties but none of the plugin's, so
 * the plugin stamps it afresh and its attempts count from 1 again.
 *
 * The guarantee: a dead letter is acknowledged only after its republish was
 * acknowledged (PUBACK) by the broker. The letters are read one at a time on
 * a "manual" connection (see conn.c) whose acknowledgements leave only when
 * the letter is settled; the republish goes out on a second connection. A
 * redrive interrupted at any point (even kill -9) leaves every unsettled
 * letter in the session, to be read again by the next run: none is lost,
 * and at most the one in hand is republished twice (at least once).
 *
 * MQTT requires acknowledgements in the order the messages came, so a
 * letter cannot be left behind while later ones are acknowledged. A letter
 * that --origin or --reason-contains passes over is therefore put back:
 * republished, unchanged, to the dead-letter topic it came from, with a
 * user property naming this run (DLQCTL_PROP_KEPT), then acknowledged. It
 * comes back to the end of the session's queue; meeting one put back by
 * this run means every letter has been seen once, and the run stops.
 * Likewise every redriven message is marked with the run
 * (DLQCTL_PROP_REDRIVEN), which the plugin carries to its next dead letter:
 * meeting that letter means the consumers still fail, and the run stops
 * rather than send it round again and again.
 * A message that cannot be redriven at all (no origin-topic, or one that is
 * not a topic) is skipped: acknowledged and not republished, so that
 * neither it nor live traffic a too-wide TOPIC catches is published again.
 * --dry-run reads without acknowledging anything and publishes nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

/* How many letters the broker may have in flight to us. Letters are still
 * read and settled one at a time; a window keeps the next ones coming. */
#define REDRIVE_WINDOW 100
#define DRY_RUN_WINDOW 65535

#define W_ACTION 13
#define W_ORIGIN 24
#define W_RETRIES 7
#define W_REASON 28
#define W_AGE 7
#define W_PAYLOAD 20

enum action {
	ACT_REDRIVE,  /* republish to the origin topic, then acknowledge */
	ACT_KEEP,     /* a filter passes it over: put it back, then acknowledge */
	ACT_SKIP,     /* not a dead letter one could redrive: acknowledge only */
};

struct redrive {
	const struct dlqctl_opts *o;  /* borrowed */
	char run[17];                 /* this run's id, on the letters it puts back */
	struct letter letter;         /* the letter read and not yet settled */
	bool have;
	bool failed;                  /* a letter could not be decoded */
	long count[ACT_SKIP + 1];     /* by enum action */
	uint64_t next_ms;             /* --rate: the earliest next republish */
};

static void on_letter(void *arg, const struct mosquitto_message *m, const mosquitto_property *props)
{
	struct redrive *r = arg;
	if(r->have){
		/* Cannot happen: one packet is read per call and each letter is
		 * settled before the next read. Refuse rather than lose one. */
		r->failed = true;
		return;
	}
	if(letter__decode(&r->letter, m, props)){
		r->failed = true;
		return;
	}
	r->have = true;
}

/* What to do with the letter; *note says why it is kept or skipped, and
 * *target (the caller's to free) is the topic to redrive it to. */
static enum action decide(const struct redrive *r, const struct letter *l, const char **note, char **target)
{
	const struct dlqctl_opts *o = r->o;
	bool match = false;
	*target = NULL;
	*note = NULL;
	if(l->origin_topic == NULL){
		*note = "not a dead letter: no " DLQ_PROP_ORIGIN_TOPIC;
		return ACT_SKIP;
	}
	if(mosquitto_pub_topic_check(l->origin_topic) != MOSQ_ERR_SUCCESS){
		*note = DLQ_PROP_ORIGIN_TOPIC " is not a topic";
		return ACT_SKIP;
	}
	if(asprintf(target, "%s%s", o->to_prefix ? o->to_prefix : "", l->origin_topic) < 0){
		*target = NULL;
		*note = "out of memory";
		return ACT_KEEP;
	}
	if(mosquitto_pub_topic_check(*target) != MOSQ_ERR_SUCCESS){
		*note = "--to-prefix and origin-topic make no topic";
		return ACT_KEEP;
	}
	if(o->origin_filter && (mosquitto_topic_matches_sub(o->origin_filter, l->origin_topic, &match) || !match)){
		*note = "origin does not match --origin";
		return ACT_KEEP;
	}
	if(o->reason_contains && (l->reason == NULL || strstr(l->reason, o->reason_contains) == NULL)){
		*note = "reason does not match --reason-contains";
		return ACT_KEEP;
	}
	return ACT_REDRIVE;
}

static void print_header(void)
{
	printf("%-*s  %-*s  %*s  %-*s  %*s  %-*s  %s\n", W_ACTION, "ACTION", W_ORIGIN, "ORIGIN-TOPIC",
			W_RETRIES, "RETRIES", W_REASON, "REASON", W_AGE, "AGE", W_PAYLOAD, "PAYLOAD", "NOTE");
	fflush(stdout);
}

static void print_row(const char *action, const struct letter *l, const char *note, const char *target)
{
	char origin[W_ORIGIN + 1], retries[W_RETRIES + 1], reason[W_REASON + 1], age[32], payload[W_PAYLOAD + 1];
	const char *o = l->origin_topic ? l->origin_topic : "-";
	const char *rc = l->retry_count ? l->retry_count : "-";
	const char *re = l->reason ? l->reason : "-";
	letter__preview(o, strlen(o), W_ORIGIN, origin, sizeof(origin));
	letter__preview(rc, strlen(rc), W_RETRIES, retries, sizeof(retries));
	letter__preview(re, strlen(re), W_REASON, reason, sizeof(reason));
	letter__preview(l->payload, (size_t)l->payloadlen, W_PAYLOAD, payload, sizeof(payload));
	letter__age(l, dlqctl_wall_ms(), age, sizeof(age));
	printf("%-*s  %-*s  %*s  %-*s  %*s  %-*s  ", W_ACTION, action, W_ORIGIN, origin, W_RETRIES, retries,
			W_REASON, reason, W_AGE, age, W_PAYLOAD, payload);
	if(note){
		printf("%s\n", note);
	}else{
		printf("-> %s\n", target);
	}
	fflush(stdout);
}

/* Waits for --rate's next slot, keeping the publisher's connection served.
 * Returns false if interrupted. */
static bool wait_rate(struct redrive *r, struct conn *pub)
{
	while(r->next_ms && dlqctl_now_ms() < r->next_ms){
		if(dlqctl_stop) return false;
		uint64_t left = r->next_ms - dlqctl_now_ms();
		if(conn__run(pub, left < 50 ? (int)left + 1 : 50) != MOSQ_ERR_SUCCESS) return false;
	}
	return true;
}

/* Publishes l to topic with props; returns 0, or prints why not. */
static int publish(struct redrive *r, struct conn *pub, const char *what, const char *topic, const mosquitto_property *props)
{
	int reason = 0;
	int rc = conn__publish(pub, topic, r->letter.payload, r->letter.payloadlen, props,
			(int)(r->o->timeout_s * 1000), &reason);
	if(rc != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "dlqctl: %s to %s: %s\n", what, topic,
				rc == MOSQ_ERR_TIMEOUT ? "no PUBACK in time" : mosquitto_strerror(rc));
		return DLQCTL_EXIT_FAIL;
	}
	if(reason >= 0x80){
		fprintf(stderr, "dlqctl: the broker refused the %s to %s: %s\n", what, topic, mosquitto_reason_string(reason));
		return DLQCTL_EXIT_FAIL;
	}
	if(reason == 0x10){
		/* The broker took it, but it reached no one: the letter stays
		 * parked rather than be acknowledged for nothing. */
		fprintf(stderr, "dlqctl: no subscriber of %s took the %s (PUBACK \"%s\"); "
				"start the consumers of it first\n", topic, what, mosquitto_reason_string(reason));
		return DLQCTL_EXIT_FAIL;
	}
	return DLQCTL_EXIT_OK;
}

/* Settles the letter in hand: republishes it (or puts it back) and
 * acknowledges it. Returns an exit status; on failure the letter is still
 * unacknowledged, and the caller must close without a DISCONNECT. */
static int settle(struct redrive *r, struct conn *reader, struct conn *pub)
{
	static const char *const done[] = { "redriven", "kept", "skipped" };
	static const char *const would[] = { "would-redrive", "would-keep", "would-skip" };
	struct letter *l = &r->letter;
	char *target = NULL;
	const char *note;
	mosquitto_property *props = NULL;
	enum action a = decide(r, l, &note, &target);
	int ret = DLQCTL_EXIT_FAIL;

	if(r->o->dry_run){
		print_row(would[a], l, note, target);
		r->count[a]++;
		ret = DLQCTL_EXIT_OK;
		goto out;
	}
	if(a != ACT_SKIP && letter__republish_props(l, a == ACT_KEEP, r->run, &props)){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(a == ACT_KEEP){
		if(publish(r, pub, "put-back of a dead letter", l->topic, props)) goto out;
	}else if(a == ACT_REDRIVE){
		if(!wait_rate(r, pub)) goto out;
		if(publish(r, pub, "redrive", target, props)) goto out;
		if(r->o->rate > 0){
			uint64_t now = dlqctl_now_ms();
			r->next_ms = (r->next_ms > now ? r->next_ms : now) + (uint64_t)(1000.0 / r->o->rate);
		}
	}
	print_row(done[a], l, note, target);
	r->count[a]++;
	int rc = conn__flush(reader, (int)(r->o->timeout_s * 1000));
	if(rc != MOSQ_ERR_SUCCESS){
		fprintf(stderr, "dlqctl: the dead letter was %s but its acknowledgement could not be sent (%s): "
				"the next run will read it again\n", done[a], mosquitto_strerror(rc));
		goto out;
	}
	ret = DLQCTL_EXIT_OK;
out:
	mosquitto_property_free_all(&props);
	free(target);
	letter__free(l);
	r->have = false;
	return ret;
}

/* The session's default client id: the same for the same TOPIC, so that
 * the session that parked the letters is found again. 23 characters, the
 * most every MQTT broker must accept. */
static void default_id(const char *topic, char *out, size_t len)
{
	uint32_t h = 2166136261u;
	for(const unsigned char *p = (const unsigned char *)topic; *p; p++){
		h = (h ^ *p) * 16777619u;
	}
	snprintf(out, len, "dlqctl-redrive-%08x", h);
}

int cmd__redrive(const struct dlqctl_opts *o)
{
	struct redrive r = { .o = o };
	struct conn reader = {0}, pub = {0};
	char idbuf[32];
	const char *id = o->id;
	const char *stopped = "interrupted";
	bool clean_end = false;
	int ret = DLQCTL_EXIT_FAIL;
	int timeout_ms = (int)(o->timeout_s * 1000);

	conn__random_hex(r.run, 8);
	if(id == NULL){
		default_id(o->topic, idbuf, sizeof(idbuf));
		id = idbuf;
	}
	struct dlqctl_opts ro = *o;
	if(o->rate > 0 && ro.keepalive < 3.0 / o->rate){
		/* The session waits for the next slot with a letter in hand and
		 * nothing written: keep the broker from timing it out. */
		ro.keepalive = 3.0 / o->rate > 65535 ? 65535 : (int)(3.0 / o->rate) + 1;
	}
	if(!o->dry_run && conn__open(&pub, o, NULL, true, 0, 0, false, NULL, NULL)) goto out;
	if(conn__open(&reader, &ro, id, false, o->session_expiry_s, o->dry_run ? DRY_RUN_WINDOW : REDRIVE_WINDOW,
			true, on_letter, &r)){
		goto out;
	}
	if(o->verbose){
		fprintf(stderr, "dlqctl: session %s %s\n", id, reader.session_present ? "resumed" : "created");
	}
	if(conn__subscribe(&reader, o->topic, 1, timeout_ms)) goto out;
	print_header();

	uint64_t started = dlqctl_now_ms();
	uint64_t last = 0;
	for(;;){
		if(dlqctl_stop){
			stopped = "interrupted";
			clean_end = !r.have;
			break;
		}
		if(reader.subacked && reader.sub_granted >= 0x80){
			fprintf(stderr, "dlqctl: the broker refused the subscription to %s: %s\n", o->topic,
					mosquitto_reason_string(reader.sub_granted));
			goto out;
		}
		if(reader.subacked && o->max >= 0 && r.count[ACT_REDRIVE] >= o->max){
			stopped = "--max reached";
			clean_end = true;
			break;
		}
		int rc = conn__read_one(&reader, 100);
		if(rc != MOSQ_ERR_SUCCESS || reader.lost){
			fprintf(stderr, "dlqctl: lost the connection: %s\n", mosquitto_strerror(rc ? rc : reader.lost_rc));
			goto out;
		}
		if(r.failed){
			fprintf(stderr, "dlqctl: out of memory, or a letter the session should not have sent\n");
			goto out;
		}
		uint64_t now = dlqctl_now_ms();
		if(reader.subacked && last == 0) last = now;
		if(r.have){
			if(o->max >= 0 && r.count[ACT_REDRIVE] >= o->max){
				stopped = "--max reached";
				break; /* the letter in hand stays unacknowledged */
			}
			if(r.letter.kept && !strcmp(r.letter.kept, r.run)){
				stopped = "every dead letter seen once";
				break; /* it was put back by this run: leave it there */
			}
			if(r.letter.redriven && !strcmp(r.letter.redriven, r.run)){
				/* Sending it round again would only repeat the failure,
				 * as fast as the consumers can fail it. */
				stopped = "a message this run redrove was dead-lettered again: its consumers still fail";
				break;
			}
			if(settle(&r, &reader, &pub)) goto out;
			last = dlqctl_now_ms();
			continue;
		}
		if(!o->dry_run){
			mosquitto_loop_misc(reader.mosq);
			rc = conn__flush(&reader, timeout_ms);
			if(rc == MOSQ_ERR_SUCCESS) rc = conn__run(&pub, 0);
			if(rc != MOSQ_ERR_SUCCESS){
				fprintf(stderr, "dlqctl: lost the connection: %s\n", mosquitto_strerror(rc));
				goto out;
			}
		}
		if(!reader.subacked && now - started > (uint64_t)timeout_ms){
			fprintf(stderr, "dlqctl: no SUBACK for %s within %g s\n", o->topic, o->timeout_s);
			goto out;
		}
		if(last && now - last >= (uint64_t)(o->idle_s * 1000)){
			stopped = "no more dead letters";
			clean_end = true;
			break;
		}
	}
	if(o->dry_run){
		fprintf(stderr, "dlqctl: dry run on %s (session %s): would redrive %ld, keep %ld, skip %ld; "
				"nothing was published or acknowledged (%s)\n", o->topic, id, r.count[ACT_REDRIVE],
				r.count[ACT_KEEP], r.count[ACT_SKIP], stopped);
		clean_end = false;
	}else{
		fprintf(stderr, "dlqctl: redrove %ld dead letter%s from %s (session %s), put back %ld, skipped %ld; "
				"stopped: %s\n", r.count[ACT_REDRIVE], r.count[ACT_REDRIVE] == 1 ? "" : "s", o->topic, id,
				r.count[ACT_KEEP], r.count[ACT_SKIP], stopped);
	}
	ret = DLQCTL_EXIT_OK;
out:
	letter__free(&r.letter);
	/* A DISCONNECT would carry the acknowledgement of the letter in hand
	 * (or, in a dry run, of every letter read): only when none is owed. */
	conn__close(&reader, ret == DLQCTL_EXIT_OK && clean_end);
	conn__close(&pub, true);
	return ret;
}
