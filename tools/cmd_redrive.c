/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl redrive TOPIC: reads dead letters from a persistent session
 * subscribed (QoS 1) to TOPIC and republishes each to its origin-topic,
 * payload unchanged, with its own properties but none of the plugin's, so
 * the plugin stamps it afresh and its attempts count from 1 again.
 *
 * The guarantee: a dead letter is acknowledged only after its republish was
 * acknowledged (PUBACK) by the broker. The letters are read on a "manual"
 * connection (see conn.c) whose acknowledgements leave only when every
 * letter read so far is settled; the republish goes out on a second
 * connection. A redrive interrupted at any point (even kill -9) leaves every
 * unsettled letter in the session, to be read again by the next run: none
 * is lost, and at most the letters in hand are republished twice (at least
 * once).
 *
 * Letters in hand: the session lets the broker have one letter in flight to
 * us (receive maximum 1), so a run normally holds one. libmosquitto queues
 * a letter's acknowledgement when it reads the letter, and 2.1's reads
 * every packet that one recv() brought in (up to 4 KiB, lib/packet_mosq.c
 * packet__read), where 2.0's read one per call; and a resumed session gets
 * everything it had in flight before at once, whatever its receive maximum
 * (after a --dry-run, every letter). So the letters read in one call are
 * held in arrival order and all settled before the acknowledgements are
 * written: they cannot be written one by one. A run that stops with some of
 * them settled and others not puts the others back (as for a filter, below),
 * so that the acknowledgements of the settled ones may go out.
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

/* How many letters the broker may have in flight to us: one, so that the
 * letters in hand are one (see above). A dry run acknowledges nothing, so
 * it must let the broker send every letter without waiting. */
#define REDRIVE_WINDOW 1
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
	struct hand hand;             /* the letters read and not yet settled */
	bool owed;                    /* letters settled whose acknowledgements are not written */
	bool failed;                  /* out of memory: a letter could not be kept */
	long count[ACT_SKIP + 1];     /* by enum action */
	uint64_t next_ms;             /* --rate: the earliest next republish */
};

static void on_letter(void *arg, const struct mosquitto_message *m, const mosquitto_property *props)
{
	struct redrive *r = arg;
	if(hand__push(&r->hand, m, props)) r->failed = true;
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
static int publish(struct redrive *r, struct conn *pub, const struct letter *l, const char *what, const char *topic,
		const mosquitto_property *props)
{
	int reason = 0;
	int rc = conn__publish(pub, topic, l->payload, l->payloadlen, props, (int)(r->o->timeout_s * 1000), &reason);
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

enum settled {
	SETTLED,      /* republished or put back (or skipped); its acknowledgement is owed */
	NOT_SETTLED,  /* a failure, said on stderr; the letter is still in hand */
	INTERRUPTED,  /* SIGINT or SIGTERM while --rate waited; the letter is still in hand */
};

/* Settles the oldest letter in hand: republishes it (or puts it back) and
 * drops it; its acknowledgement is written with those of the others in
 * hand, once none is left (see the top of this file). A dry run only
 * prints it. */
static enum settled settle(struct redrive *r, struct conn *pub)
{
	static const char *const done[] = { "redriven", "kept", "skipped" };
	static const char *const would[] = { "would-redrive", "would-keep", "would-skip" };
	struct letter *l = hand__first(&r->hand);
	char *target = NULL;
	const char *note;
	mosquitto_property *props = NULL;
	enum action a = decide(r, l, &note, &target);
	enum settled ret = NOT_SETTLED;

	if(r->o->dry_run){
		print_row(would[a], l, note, target);
		r->count[a]++;
		ret = SETTLED;
		goto out;
	}
	if(a != ACT_SKIP && letter__republish_props(l, a == ACT_KEEP, r->run, &props)){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(a == ACT_KEEP){
		if(publish(r, pub, l, "put-back of a dead letter", l->topic, props)) goto out;
	}else if(a == ACT_REDRIVE){
		if(!wait_rate(r, pub)){
			if(dlqctl_stop) ret = INTERRUPTED;
			goto out;
		}
		if(publish(r, pub, l, "redrive", target, props)) goto out;
		if(r->o->rate > 0){
			uint64_t now = dlqctl_now_ms();
			r->next_ms = (r->next_ms > now ? r->next_ms : now) + (uint64_t)(1000.0 / r->o->rate);
		}
	}
	print_row(done[a], l, note, target);
	r->count[a]++;
	ret = SETTLED;
out:
	mosquitto_property_free_all(&props);
	free(target);
	if(ret == SETTLED){
		hand__drop(&r->hand);
		r->owed = !r->o->dry_run;
	}
	return ret;
}

/* A run stops with letters in hand. Those whose acknowledgement is still
 * queued would take it with them if the settled ones' went out, so, if any
 * is owed, each of them is put back (marked with the run, as a letter a
 * filter passes over) and the acknowledgements can go; otherwise they stay
 * unacknowledged in the session. Returns an exit status; on failure they
 * are still in hand and nothing may be written. */
static int put_back_the_rest(struct redrive *r, struct conn *pub, const char *why)
{
	while(r->owed && r->hand.n){
		struct letter *l = hand__first(&r->hand);
		mosquitto_property *props = NULL;
		if(letter__republish_props(l, true, r->run, &props)){
			fprintf(stderr, "dlqctl: out of memory\n");
			return DLQCTL_EXIT_FAIL;
		}
		int rc = publish(r, pub, l, "put-back of a dead letter", l->topic, props);
		mosquitto_property_free_all(&props);
		if(rc) return rc;
		print_row("kept", l, why, NULL);
		r->count[ACT_KEEP]++;
		hand__drop(&r->hand);
	}
	return DLQCTL_EXIT_OK;
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
	const char *stopped = NULL;
	const char *rest_note = NULL;
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
	if(!o->dry_run && conn__open(&pub, o, NULL, true, 0, 0, false, NULL, NULL, NULL)) goto out;
	if(conn__open(&reader, &ro, id, false, o->session_expiry_s, o->dry_run ? DRY_RUN_WINDOW : REDRIVE_WINDOW,
			true, o->topic, on_letter, &r)){
		goto out;
	}
	if(o->verbose){
		fprintf(stderr, "dlqctl: session %s %s\n", id, reader.session_present ? "resumed" : "created");
	}
	print_header();

	uint64_t started = dlqctl_now_ms();
	uint64_t last = 0;
	while(stopped == NULL){
		if(reader.subacked && reader.sub_granted >= 0x80){
			fprintf(stderr, "dlqctl: the broker refused the subscription to %s: %s\n", o->topic,
					mosquitto_reason_string(reader.sub_granted));
			goto out;
		}
		/* The letters in hand, oldest first, until one says stop. */
		while(r.hand.n && stopped == NULL){
			const struct letter *l = hand__first(&r.hand);
			if(dlqctl_stop){
				stopped = "interrupted";
				rest_note = "read before the interruption: put back";
			}else if(o->max >= 0 && r.count[ACT_REDRIVE] >= o->max){
				stopped = "--max reached";
				rest_note = "read past --max: put back";
			}else if(l->kept && !strcmp(l->kept, r.run)){
				/* Put back by this run: leave it there. */
				stopped = "every dead letter seen once";
				rest_note = "seen once: put back";
			}else if(l->redriven && !strcmp(l->redriven, r.run)){
				/* Sending it round again would only repeat the failure,
				 * as fast as the consumers can fail it. */
				stopped = "a message this run redrove was dead-lettered again: its consumers still fail";
				rest_note = "its consumers still fail: put back";
			}else{
				enum settled st = settle(&r, &pub);
				if(st == NOT_SETTLED) goto out;
				if(st == INTERRUPTED){
					stopped = "interrupted";
					rest_note = "read before the interruption: put back";
				}
				last = dlqctl_now_ms();
			}
		}
		if(stopped) break;
		if(dlqctl_stop){
			stopped = "interrupted";
			break;
		}
		if(reader.subacked && o->max >= 0 && r.count[ACT_REDRIVE] >= o->max){
			stopped = "--max reached";
			break;
		}
		/* Every letter read is settled: their acknowledgements may go. */
		if(!o->dry_run){
			mosquitto_loop_misc(reader.mosq);
			int rc = conn__flush(&reader, timeout_ms);
			if(rc != MOSQ_ERR_SUCCESS){
				fprintf(stderr, "dlqctl: the dead letters read last were settled but their acknowledgements could not "
						"be sent (%s): the next run will read them again\n", mosquitto_strerror(rc));
				goto out;
			}
			r.owed = false;
			rc = conn__run(&pub, 0);
			if(rc != MOSQ_ERR_SUCCESS){
				fprintf(stderr, "dlqctl: lost the connection: %s\n", mosquitto_strerror(rc));
				goto out;
			}
		}
		int rc = conn__read_one(&reader, 100);
		if(rc != MOSQ_ERR_SUCCESS || reader.lost){
			fprintf(stderr, "dlqctl: lost the connection: %s\n", mosquitto_strerror(rc ? rc : reader.lost_rc));
			goto out;
		}
		if(r.failed){
			fprintf(stderr, "dlqctl: out of memory\n");
			goto out;
		}
		uint64_t now = dlqctl_now_ms();
		if(reader.subacked && last == 0) last = now;
		if(r.hand.n) continue;
		if(!reader.subacked && now - started > (uint64_t)timeout_ms){
			fprintf(stderr, "dlqctl: no SUBACK for %s within %g s\n", o->topic, o->timeout_s);
			goto out;
		}
		if(last && now - last >= (uint64_t)(o->idle_s * 1000)){
			stopped = "no more dead letters";
		}
	}
	if(o->dry_run){
		fprintf(stderr, "dlqctl: dry run on %s (session %s): would redrive %ld, keep %ld, skip %ld; "
				"nothing was published or acknowledged (%s)\n", o->topic, id, r.count[ACT_REDRIVE],
				r.count[ACT_KEEP], r.count[ACT_SKIP], stopped);
		ret = DLQCTL_EXIT_OK;
		goto out;
	}
	if(put_back_the_rest(&r, &pub, rest_note)) goto out;
	if(r.owed){
		int rc = conn__flush(&reader, timeout_ms);
		if(rc != MOSQ_ERR_SUCCESS){
			fprintf(stderr, "dlqctl: the dead letters read last were settled but their acknowledgements could not "
					"be sent (%s): the next run will read them again\n", mosquitto_strerror(rc));
			goto out;
		}
		r.owed = false;
	}
	fprintf(stderr, "dlqctl: redrove %ld dead letter%s from %s (session %s), put back %ld, skipped %ld; "
			"stopped: %s\n", r.count[ACT_REDRIVE], r.count[ACT_REDRIVE] == 1 ? "" : "s", o->topic, id,
			r.count[ACT_KEEP], r.count[ACT_SKIP], stopped);
	ret = DLQCTL_EXIT_OK;
out:
	/* A DISCONNECT would carry the acknowledgement of every letter read:
	 * only when none is in hand (in a dry run, never). After a failure the
	 * socket is just closed, and what was settled but not acknowledged is
	 * read again by the next run. */
	conn__close(&reader, ret == DLQCTL_EXIT_OK && !o->dry_run && r.hand.n == 0);
	conn__close(&pub, true);
	hand__free(&r.hand);
	return ret;
}
