/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The engine fixture of the unit, fault and fuzz tests (see
 * engine_fixture.h): parse the options, set what the broker would, start
 * the engine; stop it if it runs.
 */
#include <stdio.h>

#include "engine_fixture.h"

/* Writes step's name and msg to err, as engine_try_start promises. */
static void say(char *err, size_t errlen, const char *step, const char *msg)
{
	if(err && errlen) snprintf(err, errlen, "%s: %s", step, msg);
}

int engine_try_start(struct dlq *d, bool *live, const struct dlq_option *opts, size_t count, unsigned flags,
		char *err, size_t errlen)
{
	struct dlq_config cfg;
	char msg[1024];
	bool started = false;

	if(live == NULL) live = &started;
	*live = false;
	msg[0] = '\0';
	int rc = config__parse(opts, count, &cfg, msg, sizeof(msg));
	if(rc){
		say(err, errlen, "config__parse", msg);
		return rc;
	}
	if(flags & ENGINE_NO_SYS) cfg.sys_interval_ms = 0;
	struct dlq_broker broker = {
		.persistence = (flags & ENGINE_BROKER_PERSISTENCE) != 0,
		.exact_counting = (flags & ENGINE_EXACT_COUNTING) != 0,
	};
	if(flags & ENGINE_DELIVERY_COUNT) cfg.delivery_count = DLQ_DELIVERY_COUNT_ALWAYS;
	cfg.state_save_foreground = !(flags & ENGINE_BACKGROUND_SAVES);
	rc = dlq__init(d, &cfg, &broker, msg, sizeof(msg));
	*live = true;
	if(rc) say(err, errlen, "dlq__init", msg);
	return rc;
}

void engine_stop(struct dlq *d, bool *live)
{
	if(live == NULL || *live) dlq__cleanup(d);
	if(live) *live = false;
}
