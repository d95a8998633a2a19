/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl inspect TOPIC: subscribes (QoS 1) to a dead-letter topic or filter
 * and prints one row per dead letter (origin topic, retry count, reason,
 * client, the broker that made it, age, payload preview), or one JSON object per line with --json.
 * It drains by default (stops when nothing came for --idle seconds, or after
 * --max letters) and keeps going with --follow. Each letter is acknowledged
 * only after its row was written, and none is acknowledged beyond --max, so
 * with a persistent session (-c -i ID) a letter is never consumed unseen.
 * libmosquitto queues a letter's acknowledgement as it reads it, and 2.1's
 * reads every packet one recv() brought in (2.0's one per call): so with
 * --max the broker may have one letter in flight to us (receive maximum 1),
 * and should a read still bring letters past --max (a resumed session gets
 * all it had in flight at once), they are not shown and none of that read's
 * acknowledgements is written: its letters stay in the session.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

/* Column widths of a row; the payload takes the rest. */
#define W_TOPIC 24
#define W_ORIGIN 24
#define W_RETRIES 7
#define W_REASON 32
#define W_CLIENT 20
#define W_BROKER 16
#define W_AGE 7
#define W_PAYLOAD 40

struct inspect {
	const struct dlqctl_opts *o;  /* borrowed */
	bool with_topic;              /* a filter: show each letter's own topic */
	bool header_done;
	long count;
	uint64_t last_ms;             /* the last letter, or the SUBACK */
	bool failed;
	bool past_max;                /* a letter past --max was read: write no acknowledgement */
};

static void header(struct inspect *s)
{
	if(s->header_done || s->o->json) return;
	s->header_done = true;
	if(s->with_topic) printf("%-*s  ", W_TOPIC, "TOPIC");
	printf("%-*s  %*s  %-*s  %-*s  %-*s  %*s  %s\n", W_ORIGIN, "ORIGIN-TOPIC", W_RETRIES, "RETRIES",
			W_REASON, "REASON", W_CLIENT, "CLIENT", W_BROKER, "BROKER", W_AGE, "AGE", "PAYLOAD");
	fflush(stdout);
}

/* A cell: printable, cut to width. */
static const char *cell(const char *v, size_t width, char *buf, size_t len)
{
	if(v == NULL) return "-";
	letter__preview(v, strlen(v), width, buf, len);
	return buf;
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while(i < n){
		unsigned char c = s[i];
		size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
		if(len == 0 || c == 0 || c == 0xC0 || c == 0xC1 || i + len > n) return false;
		for(size_t k = 1; k < len; k++){
			if((s[i + k] & 0xC0) != 0x80) return false;
		}
		i += len;
	}
	return true;
}

static char *base64(const unsigned char *s, size_t n)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1);
	size_t o = 0;
	if(out == NULL) return NULL;
	for(size_t i = 0; i < n; i += 3){
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? abc[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

static bool add_opt_string(cJSON *o, const char *name, const char *v)
{
	return v == NULL || cJSON_AddStringToObject(o, name, v) != NULL;
}

static bool print_json_line(const struct letter *l, int64_t now)
{
	cJSON *o = cJSON_CreateObject();
	int64_t t = letter__parse_time(l->time);
	bool ok = o && cJSON_AddStringToObject(o, "topic", l->topic)
			&& add_opt_string(o, "originTopic", l->origin_topic)
			&& add_opt_string(o, "originId", l->origin_id)
			&& add_opt_string(o, "retryCount", l->retry_count)
			&& add_opt_string(o, "reason", l->reason)
			&& add_opt_string(o, "client", l->client)
			&& add_opt_string(o, "filter", l->filter)
			&& add_opt_string(o, "time", l->time)
			&& add_opt_string(o, "broker", l->broker)
			&& (t < 0 || cJSON_AddNumberToObject(o, "ageMs", (double)(now > t ? now - t : 0)));
	if(ok && valid_utf8(l->payload, (size_t)l->payloadlen)){
		ok = cJSON_AddStringToObject(o, "payload", l->payload) != NULL;
	}else if(ok){
		char *b = base64(l->payload, (size_t)l->payloadlen);
		ok = b && cJSON_AddStringToObject(o, "payloadBase64", b);
		free(b);
	}
	char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
	if(text) printf("%s\n", text);
	cJSON_free(text);
	cJSON_Delete(o);
	return text != NULL;
}

static void print_row(struct inspect *s, const struct letter *l, int64_t now)
{
	char topic[W_TOPIC + 1], origin[W_ORIGIN + 1], retries[W_RETRIES + 1], reason[W_REASON + 1];
	char client[W_CLIENT + 1], broker[W_BROKER + 1], age[32], payload[W_PAYLOAD + 1];
	header(s);
	letter__age(l, now, age, sizeof(age));
	letter__preview(l->payload, (size_t)l->payloadlen, W_PAYLOAD, payload, sizeof(payload));
	if(s->with_topic) printf("%-*s  ", W_TOPIC, cell(l->topic, W_TOPIC, topic, sizeof(topic)));
	printf("%-*s  %*s  %-*s  %-*s  %-*s  %*s  %s\n",
			W_ORIGIN, cell(l->origin_topic, W_ORIGIN, origin, sizeof(origin)),
			W_RETRIES, cell(l->retry_count, W_RETRIES, retries, sizeof(retries)),
			W_REASON, cell(l->reason, W_REASON, reason, sizeof(reason)),
			W_CLIENT, cell(l->client, W_CLIENT, client, sizeof(client)),
			W_BROKER, cell(l->broker, W_BROKER, broker, sizeof(broker)),
			W_AGE, age, payload);
}

static void on_letter(void *arg, const struct mosquitto_message *m, const mosquitto_property *props)
{
	struct inspect *s = arg;
	struct letter l;
	if(s->o->max >= 0 && s->count >= s->o->max){
		s->past_max = true;
		return;
	}
	if(letter__decode(&l, m, props)){
		s->failed = true;
		return;
	}
	int64_t now = dlqctl_wall_ms();
	if(s->o->json){
		s->failed = !print_json_line(&l, now) || s->failed;
	}else{
		print_row(s, &l, now);
	}
	/* The row must be out before the acknowledgement is. */
	fflush(stdout);
	letter__free(&l);
	s->count++;
	s->last_ms = dlqctl_now_ms();
}

int cmd__inspect(const struct dlqctl_opts *o)
{
	struct inspect s = { .o = o };
	struct conn c;
	int ret = DLQCTL_EXIT_FAIL;
	int timeout_ms = (int)(o->timeout_s * 1000);

	s.with_topic = strpbrk(o->topic, "+#") != NULL;
	if(conn__open(&c, o, o->id, !o->persistent, o->session_expiry_s, o->max >= 0 ? 1 : 0, true, o->topic,
			on_letter, &s)){
		goto out;
	}
	uint64_t subscribed_at = dlqctl_now_ms();
	while(!dlqctl_stop && !s.failed){
		if(o->max >= 0 && s.count >= o->max) break;
		int rc = conn__read_one(&c, 100);
		if(rc != MOSQ_ERR_SUCCESS || c.lost){
			fprintf(stderr, "dlqctl: lost the connection: %s\n", mosquitto_strerror(rc ? rc : c.lost_rc));
			goto out;
		}
		if(s.failed || s.past_max) break; /* their letters must not be acknowledged */
		if(c.subacked && c.sub_granted >= 0x80){
			fprintf(stderr, "dlqctl: the broker refused the subscription to %s: %s\n", o->topic,
					mosquitto_reason_string(c.sub_granted));
			goto out;
		}
		if(c.subacked && s.last_ms == 0){
			s.last_ms = dlqctl_now_ms();
			header(&s);
		}
		mosquitto_loop_misc(c.mosq);
		rc = conn__flush(&c, timeout_ms);
		if(rc != MOSQ_ERR_SUCCESS){
			fprintf(stderr, "dlqctl: lost the connection: %s\n", mosquitto_strerror(rc));
			goto out;
		}
		uint64_t now = dlqctl_now_ms();
		if(!c.subacked && now - subscribed_at > (uint64_t)timeout_ms){
			fprintf(stderr, "dlqctl: no SUBACK for %s within %g s\n", o->topic, o->timeout_s);
			goto out;
		}
		if(!o->follow && s.last_ms && now - s.last_ms >= (uint64_t)(o->idle_s * 1000)) break;
	}
	if(s.failed){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(!o->json) fprintf(stderr, "dlqctl: %ld dead letter%s from %s\n", s.count, s.count == 1 ? "" : "s", o->topic);
	ret = DLQCTL_EXIT_OK;
out:
	/* Every letter read was printed and its acknowledgement written, so a
	 * DISCONNECT may go out; after a failure, or a read past --max, the
	 * socket is just closed. */
	conn__close(&c, ret == DLQCTL_EXIT_OK && !s.past_max);
	return ret;
}
