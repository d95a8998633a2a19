/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Writes the binary seeds of the state-file targets from a real engine, so
 * that they follow the format when it changes:
 *   fuzz_gen_seeds <corpus dir>   (tests/fuzz/corpus)
 * writes state_snapshot/{full,header-only,truncated,with-tasks} (full-before-causes
 * and full-before-history are older files' fulls, kept as they were) and
 * state_journal/{full,header-only,remove-only,tasks}, and the binary scripts of
 * the sessions, sends, packet_size, message_out and delivery_model targets (their formats
 * are in fuzz_<target>.c). Not run by the
 * tests; the seeds it wrote are committed.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "model/redrive_task.h"
#include "store/state.h"
#include "test_util.h"

static void put(const char *dir, const char *target, const char *name, const uint8_t *data, size_t len)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s/%s", dir, target, name);
	FILE *fp = fopen(path, "wb");
	FUZZ_CHECK(fp != NULL, "%s: %s", path, strerror(errno));
	FUZZ_CHECK(fwrite(data, 1, len, fp) == len, "%s: short write", path);
	fclose(fp);
	printf("%s: %zu bytes\n", path, len);
}

/* A script being written: bytes, and strings in fuzz_input.h's form. */
struct script {
	uint8_t data[4096];
	size_t len;
};

static void b(struct script *s, unsigned v)
{
	FUZZ_CHECK(s->len < sizeof(s->data), "script too long");
	s->data[s->len++] = (uint8_t)v;
}

static void str(struct script *s, const char *v)
{
	size_t n = strlen(v);
	FUZZ_CHECK(n < 0xFE, "string too long");
	b(s, (unsigned)n);
	for(size_t i = 0; i < n; i++) b(s, (uint8_t)v[i]);
}

static void u32(struct script *s, uint32_t v)
{
	b(s, v >> 24);
	b(s, v >> 16);
	b(s, v >> 8);
	b(s, v);
}

#define S_NULL 0xFF
#define S_HUGE 0xFE

/* fuzz_sessions.c: clients 0 "a", 1 "b", 2 "$share-like/c", 3 "", 4 NULL,
 * 5 a string of the input. */
static void ss_connect(struct script *s, unsigned client, bool clean)
{
	b(s, 0);
	b(s, client);
	b(s, clean);
}

static void ss_subscribe(struct script *s, unsigned client, const char *filter, unsigned qos, uint32_t id, bool old)
{
	b(s, 1);
	b(s, client);
	if(filter) str(s, filter); else b(s, S_NULL);
	b(s, qos);
	u32(s, id);
	b(s, old);
}

static void ss_client_op(struct script *s, unsigned op, unsigned client)
{
	b(s, op);
	b(s, client);
}

static void ss_match(struct script *s, unsigned client, const char *topic)
{
	b(s, 6);
	b(s, client);
	str(s, topic);
}

static void put_script(const char *dir, const char *target, const char *name, const struct script *s)
{
	put(dir, target, name, s->data, s->len);
}

static void sessions_seeds(const char *dir)
{
	struct script s = {0};
	ss_connect(&s, 0, true);
	ss_subscribe(&s, 0, "orders/+", 1, 7, false);
	ss_subscribe(&s, 0, "$share/g/orders/#", 2, 3, false);
	ss_subscribe(&s, 0, "orders/+", 0, 9, false); /* replaces */
	ss_match(&s, 0, "orders/1");
	b(&s, 2); b(&s, 0); str(&s, "orders/+");        /* unsubscribe */
	ss_match(&s, 0, "orders/1");
	ss_client_op(&s, 3, 0);                          /* offline: lasts */
	ss_connect(&s, 0, false);                        /* resumes */
	ss_match(&s, 0, "orders/1");
	ss_client_op(&s, 4, 0);                          /* disconnect */
	ss_connect(&s, 0, false);                        /* not resumed: ended */
	b(&s, 5);                                        /* tick */
	ss_connect(&s, 1, false);
	ss_subscribe(&s, 1, "orders/#", 1, 2, false);
	ss_client_op(&s, 4, 1);
	ss_match(&s, 1, "orders/1");                     /* ended: nothing known */
	b(&s, 5);
	ss_match(&s, 1, "orders/1");
	put_script(dir, "sessions", "lifecycle", &s);

	s.len = 0;
	ss_connect(&s, 4, true);                         /* NULL client (2.1.2) */
	ss_subscribe(&s, 4, NULL, 1, 0, true);
	ss_subscribe(&s, 0, NULL, 1, 0, true);           /* NULL filter */
	ss_subscribe(&s, 3, "", 0, 0, true);             /* 2.0's "" */
	ss_subscribe(&s, 3, "$share/", 0, 0, false);
	ss_subscribe(&s, 3, "$share/g/", 0, 0, false);
	ss_subscribe(&s, 3, "$share//x", 0, 0, false);
	ss_subscribe(&s, 3, "a/#/b", 0, 0, false);
	b(&s, 2); b(&s, 4); b(&s, S_NULL);
	b(&s, 7); b(&s, S_NULL);
	b(&s, 7); str(&s, "");
	ss_client_op(&s, 3, 3);
	ss_client_op(&s, 4, 4);
	put_script(dir, "sessions", "null-and-empty", &s);

	s.len = 0;
	b(&s, 0); b(&s, 5); b(&s, S_HUGE); b(&s, 1); b(&s, 2); b(&s, 'c'); b(&s, 0);
	b(&s, 1); b(&s, 5); b(&s, S_HUGE); b(&s, 1); b(&s, 2); b(&s, 'c');
	b(&s, S_HUGE); b(&s, 0); b(&s, 0); b(&s, 'f'); b(&s, 2); u32(&s, 268435455u); b(&s, 0);
	b(&s, 8); b(&s, 1); b(&s, 79); b(&s, 1);         /* bulk: past SESSION_SUBS_MAX */
	ss_match(&s, 1, "bulk/1/x");
	ss_subscribe(&s, 1, "bulk/1/+", 2, 5, false);
	b(&s, 7); b(&s, S_HUGE); b(&s, 0); b(&s, 0); b(&s, '#');
	put_script(dir, "sessions", "huge-and-bulk", &s);

	s.len = 0;
	const char *const dead[] = {"#", "+/#", "dead/#", "$share/g/#", "dead/orders", "+/+", "dead-alerts", "+/alerts/#"};
	for(size_t i = 0; i < ARRAY_LEN(dead); i++){
		ss_subscribe(&s, i % 3, dead[i], 1, (uint32_t)i, i & 1);
		b(&s, 7); str(&s, dead[i]);
	}
	ss_subscribe(&s, 0, "#", 1, 0, false);           /* again: counted, not logged */
	ss_client_op(&s, 3, 0);
	ss_subscribe(&s, 0, "#", 1, 0, false);
	put_script(dir, "sessions", "dead-letter-subscribers", &s);
}

/* fuzz_sends.c: clients 0 "w1", 1 "w2", 2 "", 3 "$share-ish", 4/5 a
 * string of the input; ids 0-199 the k-th newest kept, 201 sixteen bytes,
 * 202 a string; content 0 the record's own. */
static void sd_op(struct script *s, unsigned op, unsigned client)
{
	b(s, op);
	b(s, client);
}

static void sd_track(struct script *s, unsigned topic, unsigned payload, unsigned qos)
{
	b(s, 0); b(s, topic); b(s, payload); b(s, qos);
}

static void sd_send(struct script *s, unsigned client, unsigned id, unsigned content)
{
	sd_op(s, 1, client); b(s, id); b(s, content);
}

static void sd_check(struct script *s, unsigned client, unsigned id, unsigned content, unsigned conn)
{
	sd_op(s, 2, client); b(s, id); b(s, content); b(s, conn);
}

static void sd_nack(struct script *s, unsigned client, unsigned id, unsigned flags)
{
	sd_op(s, 3, client); b(s, id); b(s, flags);
	if(flags & 2) b(s, 3);
}

static void sends_seeds(const char *dir)
{
	struct script s = {0};
	sd_track(&s, 0, 1, 1);                      /* orders/1 "poison" */
	sd_op(&s, 5, 0); b(&s, 1);                  /* w1 connects */
	sd_op(&s, 8, 0); b(&s, 1); b(&s, 0); b(&s, 7); /* w1 on orders/+ at QoS 0, id 7 */
	sd_send(&s, 0, 0, 0);
	sd_send(&s, 0, 0, 0);                       /* a resend */
	sd_send(&s, 1, 0, 0);                       /* to w2 */
	sd_nack(&s, 0, 0, 0);                       /* a retry copy to w1 */
	b(&s, 4);
	sd_send(&s, 0, 0, 0);                       /* the copy's send */
	sd_op(&s, 6, 0);                            /* offline */
	sd_op(&s, 5, 0); b(&s, 0);
	sd_check(&s, 0, 0, 0, 2);
	sd_nack(&s, 0, 0, 3);                       /* delayed, persists */
	sd_op(&s, 7, 0);                            /* gone */
	b(&s, 9); b(&s, 63);
	b(&s, 4);
	put_script(dir, "sends", "copy-chain", &s);

	s.len = 0;
	sd_track(&s, 0, 1, 1);
	for(unsigned conn = 0; conn < 3; conn++){
		sd_op(&s, 5, 0); b(&s, 0);
		sd_check(&s, 0, 0, 0, 1);               /* from the live connection */
		sd_send(&s, 0, 0, 0);
		sd_op(&s, 6, 0);
	}
	sd_check(&s, 0, 0, 0, 2);                   /* a reconnect's check: diverted */
	sd_check(&s, 0, 0, 0, 2);
	sd_check(&s, 1, 0, 0, 2);
	b(&s, 4);
	put_script(dir, "sends", "divert-at-max", &s);

	s.len = 0;
	sd_track(&s, 4, 0, 0);                      /* eu/alerts/x, empty payload */
	sd_track(&s, 3, 2, 2);                      /* fanout, a payload with a NUL */
	sd_send(&s, 0, 201, 0);
	for(int i = 0; i < 16; i++) b(&s, 'A');
	sd_send(&s, 0, 202, 0); str(&s, "short");
	sd_send(&s, 0, 202, 0); b(&s, S_HUGE); b(&s, 0); b(&s, 0); b(&s, 'A');
	sd_send(&s, 0, 0, 1);                       /* the record's id on other content */
	sd_send(&s, 4, 0, 0); b(&s, S_HUGE); b(&s, 0); b(&s, 0); b(&s, 'c');
	sd_send(&s, 4, 1, 0); b(&s, S_NULL);
	sd_check(&s, 2, 202, 0, 2); str(&s, "");
	sd_nack(&s, 2, 201, 0);
	for(int i = 0; i < 16; i++) b(&s, 'B');
	sd_nack(&s, 3, 1, 0);
	b(&s, 9); b(&s, 0xC0);                      /* the broker refuses three */
	sd_nack(&s, 3, 0, 0);
	b(&s, 4);
	put_script(dir, "sends", "forged-and-odd", &s);

	/* Deadlines (fanout has an ack_timeout of 1 s): a delivery ACKed, one
	 * that reports progress and then runs out into a retry copy (to
	 * retry/fanout), its late ACK, a final NACK, an ACK of a forged id. */
	s.len = 0;
	sd_track(&s, 3, 1, 1);                      /* fanout "poison" */
	sd_track(&s, 3, 3, 1);                      /* fanout "x", the newest */
	sd_send(&s, 0, 0, 0);
	sd_send(&s, 1, 1, 0);
	sd_nack(&s, 0, 0, 4);                       /* w1 ACKs "x" */
	b(&s, 9); b(&s, 6);                         /* +0.6 s */
	sd_nack(&s, 1, 1, 8);                       /* w2 reports progress on "poison" */
	b(&s, 9); b(&s, 6);
	b(&s, 4);                                   /* not yet */
	b(&s, 9); b(&s, 6);
	b(&s, 4);                                   /* ran out: a copy to retry/fanout */
	sd_nack(&s, 1, 1, 4);                       /* its late ACK: timed out */
	sd_track(&s, 3, 3, 0);
	sd_send(&s, 0, 0, 0);
	sd_nack(&s, 0, 0, 16);                      /* a final NACK */
	sd_op(&s, 3, 0); b(&s, 201);                /* an ACK of a forged id */
	for(int i = 0; i < 16; i++) b(&s, 'C');
	b(&s, 4);
	b(&s, 9); b(&s, 63);
	b(&s, 4);
	put_script(dir, "sends", "deadlines", &s);
}

/* fuzz_packet_size.c: 12-byte records. */
static void packet_size_seeds(const char *dir)
{
	struct script s = {0};
	for(unsigned sel = 0; sel < 17; sel++){
		uint8_t r[12] = {0, (uint8_t)(sel % 3), (uint8_t)sel, (uint8_t)(sel << 1), 0, 4, 0, (uint8_t)sel,
				(uint8_t)((sel + 5) % 17), 0, (uint8_t)sel, (uint8_t)sel};
		for(int i = 0; i < 12; i++) b(&s, r[i]);
	}
	for(unsigned c = 0; c < 8; c++){
		uint8_t r[12] = {1, 0, (uint8_t)(c + 2), (uint8_t)(c == 5), (uint8_t)c, 0, (uint8_t)c, 0, 0, 0, 0, 0};
		for(int i = 0; i < 12; i++) b(&s, r[i]);
	}
	put_script(dir, "packet_size", "boundaries", &s);
}

/* fuzz_message_out.c: clients 0 "w1" .. 3; content 0x80 | k<<4 the k-th
 * tracked message's topic and payload; property kinds 0 a tracked dlq-id,
 * 1 | k<<3 a fixed name (k: dlq-id, dlq-idx, dlq-i, DLQ-ID, retry-count,
 * delivery-count, k, origin-topic) with a value, 2 any pair, 3 a content
 * type, 4 a payload format, 5 to 7 an expiry. */
static void mo_send(struct script *s, unsigned client, bool v5, unsigned qos, unsigned content, unsigned count)
{
	b(s, 1); b(s, client); b(s, v5); b(s, qos); b(s, content); b(s, count);
}

static void message_out_seeds(const char *dir)
{
	struct script s = {0};
	b(&s, 0); b(&s, 0); b(&s, 1);               /* track orders/1 "poison" */
	mo_send(&s, 0, true, 1, 0x80, 2);           /* its send to w1: delivery-count 1 */
	b(&s, 1 | (6 << 3)); str(&s, "v");          /* k=v */
	b(&s, 0);                                   /* dlq-id */
	mo_send(&s, 0, true, 1, 0x80, 1); b(&s, 0); /* again: 2 */
	mo_send(&s, 1, false, 1, 0x80, 1); b(&s, 0);/* an MQTT 3 receiver */
	b(&s, 2); b(&s, 0); u32(&s, 64);            /* w1's Maximum Packet Size 64 */
	mo_send(&s, 0, true, 1, 0x80, 3); b(&s, 0); b(&s, 3); str(&s, "text/plain"); b(&s, 5); u32(&s, 60);
	b(&s, 2); b(&s, 0); u32(&s, 20);            /* too small even without the stamp */
	mo_send(&s, 0, true, 2, 0x80, 1); b(&s, 0);
	b(&s, 3);
	put_script(dir, "message_out", "stamp-and-limit", &s);

	s.len = 0;
	b(&s, 0); b(&s, 1); b(&s, 0);               /* track once "" */
	mo_send(&s, 2, true, 0, 0x80, 3);           /* empty client id */
	b(&s, 0);
	b(&s, 1); str(&s, "");                      /* a later, empty dlq-id: NULL on 2.1.2 */
	b(&s, 1 | (1 << 3)); str(&s, "x");
	mo_send(&s, 3, true, 0, 0x80, 2);
	b(&s, 1); str(&s, "AAAAAAAAAAAAAAAA");     /* forged */
	b(&s, 2); str(&s, "dlq-id"); str(&s, "short");
	mo_send(&s, 0, true, 0, 3, 1); b(&s, 0);    /* the id on another topic */
	put_script(dir, "message_out", "empty-forged-and-last", &s);
}

/* fuzz_delivery_model.c: any bytes are a sequence; these are a generator's
 * (splitmix64 from 1 to 4), a first byte for each line and set of lasting
 * sessions, long enough for about a hundred steps. */
static void delivery_model_seeds(const char *dir)
{
	static const char *names[] = {"2.0-clean", "2.1-clean", "2.0-lasting", "2.1-lasting"};
	for(unsigned k = 0; k < 4; k++){
		struct script s = {.len = 0};
		uint64_t x = k + 1;
		b(&s, (k & 1) | (k >= 2 ? 0xE : 0));
		while(s.len < 400){
			uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
			b(&s, (unsigned)((z ^ (z >> 31)) & 0xFF));
		}
		put_script(dir, "delivery_model", names[k], &s);
	}
}

/* Two redrive tasks (ENTRY_TASK), a running one with every filter member
 * and a done one with a target, appended to out. */
static void put_tasks(struct dlq_headers *out)
{
	struct dlq_letter_match m = {
		.filter = "numbers", .dead_letter = "dead/numbers", .reason = "timeout", .broker = "edge-1", .cause_given = true,
		.cause = 1,
		.since_given = true, .since = 1790000000000LL, .until_given = true, .until = 1790000060000LL,
	};
	struct dlq_redrive_task *run = redrive_task__new(&m, NULL, "operator", 200);
	struct dlq_letter_match all = {0};
	struct dlq_redrive_task *done = redrive_task__new(&all, "numbers/again", "operator", 5);
	FUZZ_CHECK(run && done, "tasks");
	run->id = 2;
	run->started_ms = 1790000100000LL;
	run->moved = 40;
	run->failed = 1;
	done->id = 1;
	done->state = DLQ_TASK_DONE;
	done->started_ms = 1790000000000LL;
	done->ended_ms = 1790000050000LL;
	done->moved = 250;
	FUZZ_CHECK(state__encode_task(done, out) == 0 && state__encode_task(run, out) == 0, "tasks");
	redrive_task__free(run);
	redrive_task__free(done);
}

/* snap with the tasks of put_tasks before its end entry (its count
 * raised by two), into out. */
static void snapshot_with_tasks(const struct dlq_headers *snap, struct dlq_headers *out)
{
	enum { END_LEN = 1 + 4 + 8 + 4 };
	FUZZ_CHECK(snap->len > 16 + END_LEN && snap->data[snap->len - END_LEN] == 4, "snapshot end");
	FUZZ_CHECK(headers__append_raw(out, snap->data, snap->len - END_LEN) == 0, "snapshot");
	put_tasks(out);
	const uint8_t *end = snap->data + snap->len - END_LEN;
	uint64_t count = 0;
	for(int i = 0; i < 8; i++) count = (count << 8) | end[5 + i];
	count += 2;
	uint8_t e[END_LEN];
	memcpy(e, end, END_LEN);
	for(int i = 0; i < 8; i++) e[5 + i] = (uint8_t)(count >> (8 * (7 - i)));
	FUZZ_CHECK(headers__append_raw(out, e, END_LEN) == 0, "snapshot");
	fuzz_fix_crcs(out->data, out->len, 16);
}

int main(int argc, char **argv)
{
	struct dlq_headers snap = {0};
	struct dlq_headers journal = {0};
	struct dlq_headers remove = {0};

	if(argc != 2){
		fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
		return 2;
	}
	fuzz_make_snapshot(&snap);
	fuzz_make_journal(&journal);
	put(argv[1], "state_snapshot", "full", snap.data, snap.len);
	put(argv[1], "state_snapshot", "header-only", snap.data, 16);
	put(argv[1], "state_snapshot", "truncated", snap.data, snap.len - 7);
	put(argv[1], "state_journal", "full", journal.data, journal.len);
	put(argv[1], "state_journal", "header-only", journal.data, 8);
	FUZZ_CHECK(state__encode_journal_header(&remove) == 0 && state__encode_remove(1, &remove) == 0
			&& state__encode_remove(3, &remove) == 0, "journal");
	put(argv[1], "state_journal", "remove-only", remove.data, remove.len);
	struct dlq_headers tasks = {0}, with_tasks = {0};
	FUZZ_CHECK(state__encode_journal_header(&tasks) == 0, "journal");
	put_tasks(&tasks);
	put(argv[1], "state_journal", "tasks", tasks.data, tasks.len);
	snapshot_with_tasks(&snap, &with_tasks);
	put(argv[1], "state_snapshot", "with-tasks", with_tasks.data, with_tasks.len);
	headers__free(&tasks);
	headers__free(&with_tasks);
	sessions_seeds(argv[1]);
	sends_seeds(argv[1]);
	packet_size_seeds(argv[1]);
	message_out_seeds(argv[1]);
	delivery_model_seeds(argv[1]);
	headers__free(&snap);
	headers__free(&journal);
	headers__free(&remove);
	return 0;
}
