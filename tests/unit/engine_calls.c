/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine calls shared by the unit suites (see engine_calls.h).
 */
#include <string.h>

#include <check.h>

#include "engine/letter_store.h"
#include "engine_calls.h"
#include "model/envelope.h"
#include "util/id.h"

void engine_start(struct dlq *d, bool *live, const struct dlq_option *opts, size_t count, unsigned flags)
{
	char err[1100];
	int rc = engine_try_start(d, live, opts, count, flags, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s", err);
}

void engine_track(struct dlq *d, const char *topic, const char *payload, uint8_t qos,
		const struct dlq_headers *h, char id[DLQ_ID_LEN + 1])
{
	const struct dlq_policy *p = dlq__policy_for(d, topic);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(dlq__track(d, p, topic, payload, (uint32_t)strlen(payload), qos,
			h ? h->data : NULL, h ? h->len : 0, id), 0);
}

enum dlq_nack_status engine_nack(struct dlq *d, const char *id, const char *client, bool persists)
{
	struct dlq_nack n = {.id = id, .id_len = strlen(id), .client = client, .client_persists = persists};
	struct dlq_nack_result res;
	dlq__nack(d, &n, &res);
	return res.status;
}

void engine_dead_letter(struct dlq *d, const char *topic, const char *payload)
{
	char id[DLQ_ID_LEN + 1];
	engine_track(d, topic, payload, 1, NULL, id);
	ck_assert_int_eq(engine_nack(d, id, "worker", false), DLQ_NACK_DEAD_LETTERED);
}

void engine_keep_letters(struct dlq *d, int from, int n, int64_t t0)
{
	struct dlq_envelope *others = envelope__copy(d->letters.oldest->env);
	struct dlq_envelope *tenth = envelope__copy(d->letters.newest->env);
	ck_assert(others && tenth);
	for(int i = from; i < n; i++){
		struct dlq_envelope *e = i % 10 ? others : tenth;
		memset(e->id.raw, 0, sizeof(e->id.raw));
		if(t0) e->time_ms = t0 + i;
		letter_store__keep(d, e);
	}
	envelope__free(others);
	envelope__free(tenth);
}

struct dlq_letter *engine_letter(struct dlq *d, const char *id)
{
	struct dlq_id raw;
	ck_assert(id__decode(id, strlen(id), &raw));
	return letter_store__find(d, &raw);
}

struct dlq_envelope *engine_edge_letter(const char *broker, const char *id, const char *reason,
		const char *payload)
{
	struct dlq_envelope *e = envelope__new(DLQ_ENV_DEAD_LETTER, NULL, "dead/orders", "orders/1", "orders/#",
			"dead/orders", reason, "worker", broker, payload, (uint32_t)strlen(payload), NULL, 0);
	ck_assert_ptr_nonnull(e);
	ck_assert(id__decode(id, strlen(id), &e->id));
	ck_assert(id__decode("OOOOOOOOOOOOOOOO", 16, &e->origin_id));
	e->time_ms = 1796000000000;
	e->retry_count = 1;
	e->cause = DLQ_DEAD_NACK;
	return e;
}
