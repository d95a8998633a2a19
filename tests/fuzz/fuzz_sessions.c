/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: sessions and subscriptions as Mosquitto 2.1 shows them
 * (sessions.c, session_events.c, deadsubs.c, nonack.c), driven through the
 * engine's entry points as the 2.1 adapters call them. Each input is a
 * binary script (fuzz_input.h) run on a fresh engine, at most MAX_OPS
 * operations, each an operation byte and its arguments:
 *
 *   0 connect     client, clean_start byte
 *   1 subscribe   client, filter, QoS byte, identifier (4 bytes), flags byte
 *                 (bit 0: also as a client without MQTT 5)
 *   2 unsubscribe client, filter
 *   3 offline     client (2.1's CLIENT_OFFLINE: the session lasts)
 *   4 disconnect  client (2.1's DISCONNECT: the session ends)
 *   5 tick        (sessions that ended and were not resumed are forgotten)
 *   6 match       client, topic (what a targeted copy would carry)
 *   7 deadsubs    filter, matched against the standard policy table
 *   8 bulk        client, count byte: that many distinct subscriptions
 *
 * A client is one of a few fixed ids, "" (2.0's empty value), NULL (2.1.2's),
 * or a string of the input, huge ones included (see pick_client).
 *
 * After every operation the table is walked: its counts and byte accounting
 * agree with its entries and stay within SESSIONS_MAX_BYTES, every entry is
 * in its hash slot, at most SESSION_SUBS_MAX subscriptions with valid
 * filters, no filter twice, every ended entry on the settle list. Each
 * operation's own outcome is checked too: a clean connect leaves no
 * subscription, a subscription made is there with its QoS and identifier, an
 * unsubscribed filter is gone, a match comes only from live subscriptions of
 * that client whose filters match the topic, a settle leaves no ended
 * session. Leaks are ASan's.
 */
#include <string.h>

#include "engine/dlq.h"
#include "fake_port.h"
#include "fuzz.h"
#include "fuzz_input.h"
#include "model/sessions.h"
#include "util/hash.h"
#include "util/topic.h"

#define MAX_OPS 200

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static char *pick_client(struct fuzz_input *in)
{
	static const char *fixed[] = {"a", "b", "$share-like/c", ""};
	uint8_t c = fuzz_input_byte(in) % 7;
	if(c < 4){
		char *s = strdup(fixed[c]);
		FUZZ_CHECK(s != NULL, "out of memory");
		return s;
	}
	if(c == 4) return NULL;
	return fuzz_input_string(in); /* may be NULL or huge */
}

static const struct dlq_session *entry(const struct dlq_sessions *s, const char *client)
{
	if(client == NULL || s->size == 0) return NULL;
	for(const struct dlq_session *e = s->table[hash__string(client) & (s->size - 1)]; e; e = e->hnext){
		if(!strcmp(e->client, client)) return e;
	}
	return NULL;
}

static const struct dlq_sub *sub_in(const struct dlq_session *e, const char *filter)
{
	for(size_t i = 0; e && filter && i < e->sub_count; i++){
		if(!strcmp(e->subs[i].filter, filter)) return &e->subs[i];
	}
	return NULL;
}

static bool on_ended_list(const struct dlq_sessions *s, const struct dlq_session *e)
{
	size_t steps = 0;
	for(const struct dlq_session *k = s->ended; k; k = k->ended_next){
		FUZZ_CHECK(++steps <= s->count, "the ended list is longer than the table (a cycle?)");
		if(k == e) return true;
	}
	return false;
}

static void check_table(const struct dlq_sessions *s)
{
	size_t count = 0, bytes = 0;
	for(size_t slot = 0; slot < s->size; slot++){
		for(const struct dlq_session *e = s->table[slot]; e; e = e->hnext){
			FUZZ_CHECK((hash__string(e->client) & (s->size - 1)) == slot, "\"%.40s\" in the wrong slot", e->client);
			FUZZ_CHECK(e->sub_count <= SESSION_SUBS_MAX && e->sub_count <= e->sub_capacity,
					"%zu subscriptions (capacity %zu)", e->sub_count, e->sub_capacity);
			size_t b = sizeof(*e) + strlen(e->client) + 1;
			for(size_t i = 0; i < e->sub_count; i++){
				const struct dlq_sub *sub = &e->subs[i];
				FUZZ_CHECK(sub->filter != NULL, "a subscription without a filter");
				FUZZ_CHECK(sub->applied == topic__shared_filter(sub->filter), "applied filter of \"%.60s\"", sub->filter);
				FUZZ_CHECK(topic__valid_filter(sub->applied), "invalid filter kept: \"%.60s\"", sub->filter);
				FUZZ_CHECK(sub->qos <= 2, "granted QoS %u kept", sub->qos);
				for(size_t j = 0; j < i; j++){
					FUZZ_CHECK(strcmp(e->subs[j].filter, sub->filter), "\"%.60s\" twice", sub->filter);
				}
				b += strlen(sub->filter) + 1 + sizeof(struct dlq_sub);
			}
			FUZZ_CHECK(b == e->bytes, "entry of \"%.40s\" accounts %zu bytes, holds %zu", e->client, e->bytes, b);
			FUZZ_CHECK(!e->ended || on_ended_list(s, e), "\"%.40s\" ended but not on the settle list", e->client);
			count++;
			bytes += b;
		}
	}
	FUZZ_CHECK(count == s->count, "table counts %zu entries, holds %zu", s->count, count);
	FUZZ_CHECK(bytes == s->bytes, "table accounts %zu bytes, holds %zu", s->bytes, bytes);
	FUZZ_CHECK(s->bytes <= SESSIONS_MAX_BYTES, "%zu bytes, past the bound", s->bytes);
}

static bool usable_filter(const char *filter)
{
	const char *applied = filter ? topic__shared_filter(filter) : NULL;
	return applied && topic__valid_filter(applied);
}

static void subscribe(struct dlq *d, const char *client, const char *filter, uint8_t qos, uint32_t id, bool old_protocol)
{
	uint64_t deadsubs_before = engine__totals(d)->subscribers_of_dead_letters;
	const char *dl, *pf;
	bool takes_dead = client && filter && deadsubs__match(&d->cfg.policies, filter, &dl, &pf);

	dlq__subscribed(d, client, filter, qos, id);
	if(old_protocol) dlq__subscribed_without_nack(d, client, filter, 4);

	FUZZ_CHECK(engine__totals(d)->subscribers_of_dead_letters == deadsubs_before + takes_dead,
			"subscribersOfDeadLetters went from %llu to %llu for \"%.60s\"", (unsigned long long)deadsubs_before,
			(unsigned long long)engine__totals(d)->subscribers_of_dead_letters, filter ? filter : "(null)");
	FUZZ_CHECK(d->deadsubs.count <= DEADSUBS_MAX, "%zu dead-letter subscribers kept", d->deadsubs.count);
	if(takes_dead && d->deadsubs.count < DEADSUBS_MAX){
		FUZZ_CHECK(deadsubs__known(&d->deadsubs, client, filter), "\"%.60s\" not remembered", filter);
	}
	const struct dlq_session *e = entry(&d->sessions, client);
	const struct dlq_sub *sub = sub_in(e, filter);
	if(!usable_filter(filter)){
		FUZZ_CHECK(sub == NULL, "unusable filter \"%.60s\" kept", filter);
	}else if(e && !e->subs_unknown){
		FUZZ_CHECK(sub != NULL, "subscription to \"%.60s\" not kept", filter);
		FUZZ_CHECK(sub->qos == qos && sub->identifier == id, "subscription kept with QoS %u id %u, not %u %u",
				sub->qos, sub->identifier, qos, id);
	}
}

static void check_match(const struct dlq_sessions *s, const char *client, const char *topic)
{
	/* sessions__match takes valid topic names only (a record's or the
	 * configuration's). */
	if(!topic__valid_publish(topic)) return;
	struct dlq_sub_match m;
	bool found = sessions__match(s, client, topic, &m);
	const struct dlq_session *e = entry(s, client);
	uint8_t qos = 0;
	size_t matching = 0;
	uint32_t distinct[SESSION_SUBS_MAX];
	size_t ndistinct = 0;
	for(size_t i = 0; e && i < e->sub_count; i++){
		if(!topic__matches(e->subs[i].applied, topic)) continue;
		if(matching++ == 0 || e->subs[i].qos > qos) qos = e->subs[i].qos;
		uint32_t id = e->subs[i].identifier;
		bool seen = id == 0;
		for(size_t k = 0; k < ndistinct && !seen; k++) seen = distinct[k] == id;
		if(!seen) distinct[ndistinct++] = id;
	}
	bool live = e && !e->ended && !e->subs_unknown;
	FUZZ_CHECK(found == (live && matching > 0), "match of \"%.40s\" on \"%.60s\": %d, %zu live subscriptions match",
			client, topic, found, live ? matching : 0);
	if(!found){
		FUZZ_CHECK(m.id_count == 0 && m.qos == 0, "no match, yet QoS %u and %zu ids", m.qos, m.id_count);
		return;
	}
	FUZZ_CHECK(m.qos == qos, "match QoS %u, the subscriptions' highest %u", m.qos, qos);
	FUZZ_CHECK(m.id_count <= SESSION_IDS_MAX, "%zu ids", m.id_count);
	FUZZ_CHECK(m.id_count == (ndistinct < SESSION_IDS_MAX ? ndistinct : SESSION_IDS_MAX),
			"%zu ids of %zu distinct", m.id_count, ndistinct);
	for(size_t i = 0; i < m.id_count; i++){
		FUZZ_CHECK(m.ids[i] != 0 && (i == 0 || m.ids[i - 1] < m.ids[i]), "ids not ascending and distinct");
		bool known = false;
		for(size_t k = 0; k < ndistinct && !known; k++) known = distinct[k] == m.ids[i];
		FUZZ_CHECK(known, "id %u of no matching subscription", m.ids[i]);
	}
}

static bool is_dead_letter(const struct dlq_policy_table *t, const char *dl)
{
	for(size_t i = 0; i < t->count; i++) if(t->items[i].dead_letter == dl) return true;
	return false;
}

static bool is_policy_filter(const struct dlq_policy_table *t, const char *pf)
{
	for(size_t i = 0; i < t->count; i++) if(t->items[i].filter == pf) return true;
	return false;
}

static void check_deadsubs_match(const struct dlq_policy_table *t, const char *filter)
{
	const char *dl = NULL, *pf = NULL;
	bool got = deadsubs__match(t, filter, &dl, &pf);
	bool want_dl = false, want_pf = false;
	const char *applied = usable_filter(filter) ? topic__shared_filter(filter) : NULL;
	for(size_t i = 0; applied && i < t->count; i++){
		want_dl |= t->items[i].dead_letter && topic__matches(applied, t->items[i].dead_letter);
		want_pf |= topic__filters_overlap(t->items[i].filter, applied);
	}
	FUZZ_CHECK(got == (want_dl && want_pf), "deadsubs__match(\"%.60s\") %d, a plain walk %d %d", filter ? filter : "(null)",
			got, want_dl, want_pf);
	if(got){
		FUZZ_CHECK(is_dead_letter(t, dl) && topic__matches(applied, dl), "dead letter \"%s\"", dl);
		FUZZ_CHECK(is_policy_filter(t, pf) && topic__filters_overlap(pf, applied), "policy filter \"%s\"", pf);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_input in = {data, size, 0};
	struct dlq d;
	uintptr_t conn = 1;

	fuzz_engine_init(&d);
	for(int op = 0; op < MAX_OPS && fuzz_input_more(&in); op++){
		uint8_t code = fuzz_input_byte(&in) % 9;
		char *client = NULL, *arg = NULL;
		switch(code){
		case 0: {
			client = pick_client(&in);
			bool clean = fuzz_input_byte(&in) & 1;
			dlq__client_connected(&d, client, clean);
			if(client) dlq__client_active(&d, client, conn++);
			const struct dlq_session *e = entry(&d.sessions, client);
			if(e){
				FUZZ_CHECK(e->online && !e->ended, "\"%.40s\" connected, not online", client);
				FUZZ_CHECK(!clean || (e->sub_count == 0 && !e->subs_unknown && e->life == DLQ_SESSION_UNKNOWN),
						"a clean start of \"%.40s\" kept its session", client);
			}
			break;
		}
		case 1: {
			client = pick_client(&in);
			arg = fuzz_input_string(&in);
			uint8_t qos = fuzz_input_byte(&in) % 3;           /* the broker refuses QoS 3 */
			uint32_t id = fuzz_input_u32(&in) & 0x0FFFFFFFu;  /* and identifiers past 268435455 */
			subscribe(&d, client, arg, qos, id, fuzz_input_byte(&in) & 1);
			break;
		}
		case 2:
			client = pick_client(&in);
			arg = fuzz_input_string(&in);
			dlq__unsubscribed(&d, client, arg);
			FUZZ_CHECK(sub_in(entry(&d.sessions, client), arg) == NULL, "\"%.60s\" still subscribed", arg);
			break;
		case 3:
			client = pick_client(&in);
			if(client == NULL) break; /* as adapter__connection_ended */
			dlq__client_left(&d, client, conn, false);
			dlq__client_offline(&d, client);
			FUZZ_CHECK(sessions__life(&d.sessions, client) == DLQ_SESSION_LASTS || entry(&d.sessions, client) == NULL,
					"\"%.40s\" offline, its session not lasting", client);
			for(size_t i = 0; i < d.deadsubs.count; i++){
				FUZZ_CHECK(strcmp(d.deadsubs.items[i].client, client), "\"%.40s\" left, still in deadsubs", client);
			}
			break;
		case 4:
			client = pick_client(&in);
			if(client == NULL) break;
			dlq__client_left(&d, client, conn, true);
			dlq__client_gone(&d, client);
			FUZZ_CHECK(sessions__life(&d.sessions, client) == DLQ_SESSION_UNKNOWN, "\"%.40s\" ended, yet lasting", client);
			break;
		case 5:
			dlq__tick(&d);
			FUZZ_CHECK(d.sessions.ended == NULL, "a settle left the ended list");
			for(size_t slot = 0; slot < d.sessions.size; slot++){
				for(const struct dlq_session *e = d.sessions.table[slot]; e; e = e->hnext){
					FUZZ_CHECK(!e->ended, "\"%.40s\" ended and not forgotten at a settle", e->client);
				}
			}
			fuzz_port_clear();
			break;
		case 6:
			client = pick_client(&in);
			arg = fuzz_input_string(&in);
			if(client && arg) check_match(&d.sessions, client, arg);
			break;
		case 7:
			arg = fuzz_input_string(&in);
			check_deadsubs_match(&d.cfg.policies, arg);
			break;
		case 8: {
			client = pick_client(&in);
			unsigned n = fuzz_input_byte(&in) % 80;
			uint8_t qos = fuzz_input_byte(&in) % 3;
			for(unsigned i = 0; i < n; i++){
				char f[32];
				snprintf(f, sizeof(f), i % 3 ? "bulk/%u/+" : "$share/g/bulk/%u", i);
				subscribe(&d, client, f, qos, i, false);
			}
			const struct dlq_session *e = entry(&d.sessions, client);
			FUZZ_CHECK(e == NULL || e->subs_unknown || e->sub_count <= SESSION_SUBS_MAX, "past SESSION_SUBS_MAX");
			break;
		}
		}
		check_table(&d.sessions);
		free(client);
		free(arg);
	}
	fuzz_engine_fini(&d);
	return 0;
}
