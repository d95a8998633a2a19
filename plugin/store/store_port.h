/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The store port: how the engine tells durable storage what changed, as
 * util/port.h is how it tells the broker. Set once at startup (dlq__init:
 * persist.c's journal when plugin_opt_state_save_on_change asks for one;
 * nothing otherwise, and then no note costs more than a test); a test can
 * set a port of its own. The engine never calls the state file's functions
 * for a change, and the state file never reads the engine: what it saves
 * whole it sees through a view (state.h, struct state_view).
 */
#ifndef DLQ_STORE_PORT_H
#define DLQ_STORE_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dlq_deadline;
struct dlq_delivery_saved;
struct dlq_envelope;
struct dlq_id;
struct dlq_letter;
struct dlq_record;
struct dlq_redrive_task;

struct dlq_store_ops {
	/* The engine took on e (it is owed until the broker takes it). sync:
	 * make it durable now; otherwise the next synced note does. */
	void (*note_add)(void *ctx, const struct dlq_envelope *e, bool sync);
	/* A delivery became NACKable (an inbound publish was tracked, or a
	 * retry copy was published). Durable at once: the broker acknowledges
	 * the publish after. */
	void (*note_record)(void *ctx, const struct dlq_record *r);
	/* client settled its delivery of r, how (enum dlq_settled_how): the
	 * last note of an accepted NACK, ACK or timeout, durable at once, so
	 * that the settlement and its envelope are before the broker
	 * acknowledges the NACK or ACK (and a timeout is not repeated after a
	 * crash). */
	void (*note_settler)(void *ctx, const struct dlq_record *r, const char *client, uint8_t how);
	/* The retry copy r was taken by the broker for client, whose session
	 * does not persist, and is held for it (holds.h). Not synced. */
	void (*note_hold)(void *ctx, const struct dlq_record *r, const char *client);
	/* The broker took the envelope with seq (or it was replaced). */
	void (*note_remove)(void *ctx, uint64_t seq);
	/* The counts of the delivery of r to s->client changed (a send, a
	 * redelivery counted, a diversion). Written at once, not synced: a
	 * SIGKILL does not lose what the kernel was given, and the broker
	 * acknowledges nothing on its strength. */
	void (*note_delivery)(void *ctx, const struct dlq_record *r, const struct dlq_delivery_saved *s);
	/* The clock of delivery e (model/deadlines.h) started, or started
	 * again (progress); or e waits for one. Written at once, not synced,
	 * as a delivery's counts: its settlement, which ends it, is synced. */
	void (*note_deadline)(void *ctx, const struct dlq_deadline *e);
	/* The dead letter l was kept (model/letters.h). Durable at once: the
	 * broker does not send a dead letter again, so the store's copy is the
	 * only one a crash could not lose. */
	void (*note_letter)(void *ctx, const struct dlq_letter *l);
	/* The kept dead letter with id left the store (redriven, deleted,
	 * purged or dropped to make room). Written, not synced: a crash before
	 * the next sync at worst keeps it again. */
	void (*note_letter_gone)(void *ctx, const struct dlq_id *id);
	/* A redrive task started, ended, or made progress
	 * (model/redrive_task.h); a later note of it replaces an earlier one.
	 * sync: its start and end; progress is written, not synced (a crash
	 * restores older counters; the letters moved are gone all the same). */
	void (*note_task)(void *ctx, const struct dlq_redrive_task *t, bool sync);
};

/* A port: ops NULL when nothing is stored. */
struct dlq_store_port {
	const struct dlq_store_ops *ops; /* borrowed, static */
	void *ctx;                       /* borrowed: the store's own state */
};

static inline bool store_port__on(const struct dlq_store_port *s){ return s->ops != NULL; }

static inline void store_port__add(const struct dlq_store_port *s, const struct dlq_envelope *e, bool sync)
{
	if(s->ops) s->ops->note_add(s->ctx, e, sync);
}
static inline void store_port__record(const struct dlq_store_port *s, const struct dlq_record *r)
{
	if(s->ops) s->ops->note_record(s->ctx, r);
}
static inline void store_port__settler(const struct dlq_store_port *s, const struct dlq_record *r, const char *client,
		uint8_t how)
{
	if(s->ops) s->ops->note_settler(s->ctx, r, client, how);
}
static inline void store_port__hold(const struct dlq_store_port *s, const struct dlq_record *r, const char *client)
{
	if(s->ops) s->ops->note_hold(s->ctx, r, client);
}
static inline void store_port__delivery(const struct dlq_store_port *s, const struct dlq_record *r,
		const struct dlq_delivery_saved *saved)
{
	if(s->ops) s->ops->note_delivery(s->ctx, r, saved);
}
static inline void store_port__deadline(const struct dlq_store_port *s, const struct dlq_deadline *e)
{
	if(s->ops) s->ops->note_deadline(s->ctx, e);
}
static inline void store_port__remove(const struct dlq_store_port *s, uint64_t seq)
{
	if(s->ops) s->ops->note_remove(s->ctx, seq);
}
static inline void store_port__letter(const struct dlq_store_port *s, const struct dlq_letter *l)
{
	if(s->ops) s->ops->note_letter(s->ctx, l);
}
static inline void store_port__letter_gone(const struct dlq_store_port *s, const struct dlq_id *id)
{
	if(s->ops) s->ops->note_letter_gone(s->ctx, id);
}
static inline void store_port__task(const struct dlq_store_port *s, const struct dlq_redrive_task *t, bool sync)
{
	if(s->ops && s->ops->note_task) s->ops->note_task(s->ctx, t, sync);
}

#endif
