/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The model check of a delivery's life (issue 45; the model and its
 * invariants are delivery_model.h's): seeded random sequences on each
 * line's rules, and the sequences they found, kept as named cases, shrunk
 * to the steps that matter.
 *
 * A failure prints the sequence's seed and its steps. DLQ_MODEL_SEED=<seed>
 * replays that one sequence (printing its steps); DLQ_MODEL_RUNS=<n> runs
 * n sequences per line instead of the default.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_suite.h"
#include "delivery_model.h"

enum {
	STEPS = 40,       /* events per sequence */
	RUNS = 1500,      /* sequences per broker line by default */
};

void model_failed(const char *what)
{
	ck_abort_msg("seed %" PRIu64 ": %s", model.seed, what);
	abort(); /* not reached: Check ends the test */
}

static unsigned runs(void)
{
	const char *s = getenv("DLQ_MODEL_RUNS");
	return s ? (unsigned)strtoul(s, NULL, 10) : RUNS;
}

static void run_line(bool v21)
{
	const char *replay = getenv("DLQ_MODEL_SEED");
	if(replay){
		uint64_t seed = strtoull(replay, NULL, 10);
		if(((seed & 1) != 0) == v21){
			model_verbose = true;
			model_run(seed, STEPS);
		}
	}else{
		for(unsigned k = 0; k < runs(); k++){
			model_run(2 * (uint64_t)k + (v21 ? 1 : 0), STEPS);
		}
	}
}

/* ---- sequences the model found, kept as they were shrunk ---- */


/* The start of the sequences below: m0 is sent to b (clean, as all), and
 * its clock runs out: the retry copy for b is handed over in that tick. */
static void copy_for_b_handed_over(uint64_t seed, bool v21)
{
	model.rng = 1;
	model_begin(seed, v21, 0);
	model_publish();
	model_checked();
	model_deliver(0, 1);
	model_checked();
	model_ticked(6000);
	MODEL_EXPECT(model.n_items == 2 && model.items[1].target == 1, "no retry copy for b");
}

/* Found by the model (seed 21, on 2.1; on 2.0 too): a retry copy the
 * broker accepted in the loop pass it stopped in, for a client whose
 * session does not survive a restart, was both owed (to be published
 * again) and held for its client, and the restart made a dead letter of
 * each: two for one chain. */
static void copy_owed_at_a_restart(bool v21)
{
	copy_for_b_handed_over(1, v21);
	model_restart();
	model_checked();
	model_ticked(1);
	MODEL_EXPECT(model.dead[0][1] == 1, "%u dead letters of m0 for b after the restart", model.dead[0][1]);
	model_end();
}

START_TEST(a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_1)
{
	copy_owed_at_a_restart(true);
}
END_TEST

START_TEST(a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_0)
{
	copy_owed_at_a_restart(false);
}
END_TEST

/* Found by the model (seed 129, on 2.1): a retry copy the broker took
 * for a client that then left without a session was dead-lettered then
 * (it was held); a restart in the same loop pass saved it owed all the
 * same, and it was published again, for a client without a session, and
 * dead-lettered a second time. */
START_TEST(a_copy_dead_lettered_at_a_leave_is_not_again_at_a_restart_on_2_1)
{
	copy_for_b_handed_over(3, true);
	model_leave(1, true);   /* before the broker sent it: dead-lettered */
	model_checked();
	MODEL_EXPECT(model.dead[0][1] == 1, "m0's copy for b not dead-lettered when b left");
	model_restart();
	model_checked();
	model_ticked(1);
	model_end();
}
END_TEST

/* Found by the model (seed 59693, on 2.1): a retry copy for a lasting
 * session, owed at a restart (the broker had taken it, and restored it in
 * the session), was published again at the first tick after the restart;
 * by then the client had received the session's copy and ended its
 * session: the copy published again was dead-lettered for want of a
 * session, and the delivery of the session's copy ran out into the
 * chain's next attempt and its own dead letter: two for one chain. */
START_TEST(a_copy_published_again_after_a_restart_that_reached_its_client_is_dropped_on_2_1)
{
	model.rng = 1;
	model_begin(4, true, 2);   /* b's session lasts */
	model_publish();
	model_checked();
	model_deliver(0, 1);
	model_checked();
	model_settle(0, 1, 2);  /* b NACKs m0: its copy is handed over */
	model_checked();
	model_ticked(1);
	model_restart();        /* the copy is owed, and in b's session */
	model_checked();
	model_return(1, false);
	model_checked();
	model_deliver(1, 1);    /* the session's copy is sent to b */
	model_checked();
	model_leave(1, true);   /* and b ends its session */
	model_checked();
	model_ticked(1);           /* the owed copy falls due: b has no session */
	MODEL_EXPECT(model.dead[0][1] == 0, "the copy b received was dead-lettered when it was published again");
	model_end();
}
END_TEST

/* Found by the model (seed 0, on 2.0): a delivery in a client's line
 * that was settled while it waited (here a retry copy for a clean session
 * that a restart dead-lettered, its hold let go) was dropped from the line
 * when its clock ran out, without starting the next one's: a connected
 * client's next delivery then waited on no clock, for ever. */
START_TEST(the_line_goes_on_past_a_delivery_settled_while_it_waited_on_2_0)
{
	model.rng = 1;
	model_begin(2, false, 0);
	model_publish();
	model_checked();
	model_publish();
	model_checked();
	model_deliver(0, 2);        /* c's line: m0, running */
	model_checked();
	model_settle(1, 2, 2);      /* c NACKs m1: its copy waits behind m0 */
	model_checked();
	MODEL_EXPECT(model.n_items == 3 && model.items[2].target == 2, "no retry copy for c");
	model_restart();            /* the copy's hold is let go with its dead letter; c comes back */
	model_checked();
	for(int k = 0; k < 4; k++){
		model_ticked(6000);        /* m0 runs out (a copy behind), then the let-go copy's clock */
	}
	MODEL_EXPECT(model.dead[1][2] == 1, "m1's copy for c not dead-lettered at the restart");
	model_end();
}
END_TEST

START_TEST(random_sequences_on_2_1)
{
	run_line(true);
}
END_TEST

START_TEST(random_sequences_on_2_0)
{
	run_line(false);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("delivery_model");
	TCase *tc = tcase_create("random");
	tcase_set_timeout(tc, 300); /* an upper bound: meson.build says why */
	check_add(s, tc, CHECK_TESTS(random_sequences_on_2_1, random_sequences_on_2_0));
	tc = tcase_create("found");
	tcase_set_timeout(tc, 60);
	check_add(s, tc, CHECK_TESTS(a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_1,
			a_copy_owed_at_a_restart_is_dead_lettered_once_on_2_0,
			the_line_goes_on_past_a_delivery_settled_while_it_waited_on_2_0,
			a_copy_dead_lettered_at_a_leave_is_not_again_at_a_restart_on_2_1,
			a_copy_published_again_after_a_restart_that_reached_its_client_is_dropped_on_2_1));
	return check_run(s);
}
