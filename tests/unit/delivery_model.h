/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A model of a delivery's life (issue 45): what happens to tracked
 * messages under an ack_timeout (a message routed, sent, ACKed, NACKed,
 * finally NACKed, reported in progress, its clock running out, its
 * subscriber leaving, coming back, subscribing or unsubscribing, its
 * session ending, a reload, a restart from the state file) over three
 * subscribers and up to four messages, on Mosquitto 2.1's rule (a clock
 * per send) and 2.0's (one delivery at a time per subscriber, from
 * redelivery tracking's access checks), driven through the engine's face
 * (dlq.h) against the fake broker port. After every step the invariants of
 * docs/semantics.md ("Acknowledgement deadlines", Invariants) are checked;
 * at the end of a sequence it is driven to quiescence (every lasting
 * session back and sent what waits for it, ticks past every deadline,
 * every session ended) and every chain must have ended ACKed or
 * dead-lettered exactly once.
 *
 * Two programs drive it: the unit suite (test_delivery_model.c: seeded
 * random sequences, and the sequences they found kept as named cases) and
 * the fuzz target (tests/fuzz/fuzz_delivery_model.c: every choice read
 * from the input). Each defines model_failed, which a broken invariant
 * calls.
 */
#ifndef DLQ_TEST_DELIVERY_MODEL_H
#define DLQ_TEST_DELIVERY_MODEL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/dlq.h"

enum {
	CLIENTS = 3,
	MSGS = 4,
	ITEMS = 64,
	TRACE = 4096,
	MAX_ATTEMPTS = 3,
};

struct model_client {
	char id[4];
	bool persists;    /* its sessions outlive their connections */
	bool connected;
	bool has_session; /* the broker holds a session for it */
	bool subscribed;  /* its session subscribes to jobs/# */
	bool seen_lasting;/* 2.1: the engine was told its session lasts (CLIENT_OFFLINE) */
	uintptr_t conn;
};

/* A tracked message the broker may deliver: an original, or a retry copy
 * for one client (retry_to=delivery). */
struct model_item {
	char id[DLQ_ID_LEN + 1];
	char topic[16];
	char payload[8];
	int origin;       /* the original message's index */
	int target;       /* a copy's client; -1: an original */
	unsigned retry_count;
	bool in_session;  /* a copy the target's session holds (2.1) */
	unsigned sends[CLIENTS];
	unsigned born;    /* a copy: the ticks before it was handed over */
	bool queued[CLIENTS];  /* the client's session holds it, to be sent (again) */
	bool got[CLIENTS];     /* the client received it: it knows its dlq-id */
	bool settled[CLIENTS]; /* the client settled it: it is not resent */
};

struct model {
	uint64_t seed;
	uint64_t rng;
	/* The source of every choice: a number in [0, n); NULL: a generator
	 * seeded from rng. */
	unsigned (*below)(unsigned n);
	bool v21;
	struct model_client c[CLIENTS];
	struct model_item items[ITEMS];
	size_t n_items;
	int msgs;
	size_t seen;                   /* fake publishes taken in */
	bool chain[MSGS][CLIENTS];     /* the client was held to the message: its chain runs */
	bool acked[MSGS][CLIENTS];     /* an ACK of the chain was accepted */
	unsigned dead[MSGS][CLIENTS];  /* dead letters of the chain */
	uint64_t dead_seen, copies_seen, acks_accepted;
	uint64_t dead_sent;            /* dead-letter publishes, one published again after a restart included */
	char letters[MSGS * CLIENTS * 2][DLQ_ID_LEN + 1]; /* the dead letters' ids */
	uint64_t copies_sent;          /* copy publishes, a copy published again after a restart included */
	/* What the port saw and the engine accepted before the last restart
	 * (the counters start again at a restart). */
	uint64_t base_dead, base_copies, base_acks;
	unsigned restarts;
	unsigned ack_timeout_s;
	char policy_path[96];
	char state_path[96];
	char trace[TRACE];
	size_t trace_len;
	int step;
	unsigned ticks;
};

/* The model: one sequence at a time. */
extern struct model model;
/* Print each step to stderr as it happens. */
extern bool model_verbose;

/* A broken invariant, with what broke (the seed, line and steps are
 * printed before). Defined by the program that runs the model; it does
 * not return. */
void model_failed(const char *what) __attribute__((noreturn));

/* Fails with the seed, the line and the steps so far. */
#define MODEL_EXPECT(cond, ...) do{ \
		if(!(cond)){ \
			char what_[256]; \
			snprintf(what_, sizeof(what_), __VA_ARGS__); \
			fprintf(stderr, "model: seed %" PRIu64 " (%s) failed at step %d: %s\n" \
					"replay: DLQ_MODEL_SEED=%" PRIu64 "\nsteps:\n%s", model.seed, model.v21 ? "2.1" : "2.0", \
					model.step, what_, model.seed, model.trace); \
			model_failed(what_); \
		} \
	}while(0)

/* Starts a sequence on a line (v21: 2.1's rules): the engine from nothing,
 * the clients connected, lasting or clean as persists says (a bit per
 * client). */
void model_begin(uint64_t seed, bool v21, unsigned persists);
/* One random event, its choices from model.below (or model.rng). */
void model_step(void);
/* The invariants that hold after every step. */
void model_check(void);
/* Ends a sequence: to quiescence, and the checks there. */
void model_end(void);
/* One sequence from seed (its line is the seed's lowest bit) of steps
 * random events, its choices from model.rng. */
void model_run(uint64_t seed, int steps);

/* The events, for written sequences. */
void model_publish(void);
void model_deliver(size_t i, int c);
/* how: 0 ACK, 1 progress, 2 NACK, 3 final NACK. */
void model_settle(size_t i, int c, unsigned how);
void model_leave(int c, bool end_session);
void model_return(int c, bool clean);
void model_restart(void);
void model_tick_by(uint64_t ms);
/* The invariants, and the next step. */
void model_checked(void);
/* A tick of ms, a step of its own, checked. */
void model_ticked(uint64_t ms);

#endif
