/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine's tick (see dlq.h, dlq__tick), once per pass of the broker's
 * main loop: what the broker took, records past their NACK window,
 * deliveries whose ack_timeout ran out (attempts.c), kept dead letters past
 * their age (letter_store.c), delayed copies that are
 * due, what is owed, clients to disconnect, and the state
 * file ($SYS topics are the adapter's, after this). Under load the broker ticks about once per message,
 * so a tick with nothing to do returns in a few loads.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/dlq.h"
#include "engine/engine.h"
#include "engine/letter_store.h"
#include "engine/outbound.h"
#include "engine/redrive_tasks.h"
#include "model/envelope.h"
#include "util/errtext.h"
#include "util/port.h"

/* Mosquitto 2.0.x does not give back the in-flight slot of a message
 * removed when a session reconnects (src/handle_connect.c,
 * connection_check_acl): with a window of one, nothing more would be sent
 * to that client. Disconnected once, it reconnects to a recounted window. */
static void kick_clients(struct dlq *d)
{
	struct dlq_kick *k = redelivery__take_kicks(&d->redelivery);
	while(k){
		struct dlq_kick *next = k->next;
		int rc = port__kick(k->client);
		port__log(DLQ_LOG_NOTICE, "disconnected " QFMT " once so that the broker recounts its in-flight window "
				"after a diverted message%s%s", Q(k->client), rc ? ": " : "", rc ? strerror(rc) : "");
		free(k);
		k = next;
	}
}

/* Whether this tick has nothing to do before the state file and $SYS
 * topics: nothing the broker took or may have taken, no record past its
 * window, no delayed copy due, nothing owed, no client to disconnect, no
 * pass of the dead letters' age bound due. The
 * broker ticks about once per message under load, so this is checked in a
 * few loads instead of walking each part's own early return. */
static bool tick_idle(const struct dlq *d, uint64_t now)
{
	const struct dlq_record *oldest = d->ledger.oldest;
	return d->unsaved.list.count == 0 && d->outbox.settling.count == 0 && d->outbox.sent.count == 0
			&& d->outbox.owed.count == 0 && d->redelivery.kicks == NULL
			&& (d->delayed.count == 0 || d->delayed.heap[0]->due_ms > now)
			&& (oldest == NULL || now - oldest->created_ms <= d->cfg.nack_window_ms)
			&& (d->deadlines.running == 0 || deadlines__next_due(&d->deadlines) > now)
			&& d->letters_due_ms > now && d->tasks.running == 0;
}

/* Whether no tick could have anything to do, whatever the time: nothing
 * tracked, delayed, owed or taken, no state file, no kept letter with an
 * age bound. Then a
 * tick need not even read the clock. */
static bool tick_timeless(const struct dlq *d)
{
	return d->ledger.oldest == NULL && d->delayed.count == 0 && d->unsaved.list.count == 0
			&& d->outbox.settling.count == 0 && d->outbox.sent.count == 0 && d->outbox.owed.count == 0
			&& d->redelivery.kicks == NULL && d->cfg.state_file == NULL && d->letters_due_ms == UINT64_MAX
			&& d->tasks.running == 0;
}

static __attribute__((noinline)) uint64_t tick_work(struct dlq *d)
{
	uint64_t now = port__now_ms();
	if(tick_idle(d, now)) goto timed;
	/* What was accepted before the previous tick was taken by the broker
	 * at the top of this loop pass. */
	engine__settle_taken(d, now);
	ledger__expire(&d->ledger, now, d->cfg.nack_window_ms);
	/* Deliveries whose ack_timeout ran out: retry copies or dead letters,
	 * sent below with the rest. */
	if(d->deadlines.running && deadlines__next_due(&d->deadlines) <= now) engine__deadlines_tick(d, now);
	/* Kept dead letters past their age (dead_letter_keep_for). */
	if(d->letters_due_ms <= now) letter_store__expire(d, now, LETTER_STORE_EXPIRE_PER_TICK);
	/* Redrive tasks: what their rate allows (redrive_tasks.c). */
	if(d->tasks.running) redrive_tasks__tick(d, now);

	struct dlq_envelope *e;
	while((e = schedule__peek(&d->delayed)) != NULL && e->due_ms <= now){
		schedule__remove(&d->delayed, e);
		outbound__send(d, e);
	}

	/* Try everything owed once; what fails again goes back in order. */
	size_t n = d->outbox.owed.count;
	while(n-- > 0){
		e = d->outbox.owed.head;
		outbox__unlink(&d->outbox, &d->outbox.owed, e);
		outbound__send(d, e);
	}

	/* Everything accepted so far is taken at the top of the next pass. */
	outbox__move_all(&d->outbox.settling, &d->outbox.sent);
	kick_clients(d);
timed:
	/* Checked here, where the answer is usually no, to spare two calls
	 * per tick. */
	if(d->cfg.state_file) persist__tick(&d->persist, now);
	return now;
}

static uint64_t tick_awake(struct dlq *d)
{
	/* 2.1: sessions that ended in the previous loop pass, and were not
	 * resumed in it, are forgotten. */
	if(d->sessions.ended) sessions__settle(&d->sessions);
	if(tick_timeless(d)){
		d->tick_quiet = true;
		return 0;
	}
	return tick_work(d);
}

/* When the last tick found nothing at all to do and no event came since
 * that could change that (tick_quiet), one load; link-time optimisation
 * inlines it into the TICK callback. */
uint64_t dlq__tick(struct dlq *d)
{
	if(!d->tick_quiet || d->sessions.ended) return tick_awake(d);
	return 0;
}
