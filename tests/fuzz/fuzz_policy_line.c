/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: one plugin_opt_policy value (policy_parse__line). The
 * input up to its first NUL is the line, as mosquitto.conf would hand it
 * over. An accepted policy must hold what policy.h promises (a filter, a
 * dead-letter topic, values in range) and, put in a table of its own, must
 * match the topics made from its filter; a refused one must say why.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "model/policy.h"
#include "mosquitto_dlq.h"
#include "util/topic.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = malloc(size + 1);
	char err[1024];
	struct dlq_policy p;
	struct dlq_policy_table t = {0};

	if(line == NULL) return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	err[0] = '\0';
	int rc = policy_parse__line(line, &p, err, sizeof(err));
	if(rc){
		FUZZ_CHECK(rc == EINVAL, "rc %d", rc);
		FUZZ_CHECK(err[0] != '\0', "refused without a message");
		FUZZ_CHECK(p.filter == NULL && p.dead_letter == NULL && p.retry_to == NULL, "refused but holds strings");
		free(line);
		return 0;
	}
	FUZZ_CHECK(p.filter && topic__valid_filter(p.filter), "filter");
	FUZZ_CHECK(p.dead_letter && topic__valid_publish(p.dead_letter) && p.dead_letter[0] != '$', "dead_letter");
	FUZZ_CHECK(p.retry_to == NULL || (topic__valid_publish(p.retry_to) && p.retry_to[0] != '$'), "retry_to");
	FUZZ_CHECK(p.max_attempts >= DLQ_MAX_ATTEMPTS_MIN && p.max_attempts <= DLQ_MAX_ATTEMPTS_MAX, "max_attempts %u", p.max_attempts);
	FUZZ_CHECK(p.retry_delay_ms <= p.retry_max_delay_ms, "delays");
	FUZZ_CHECK(p.retry_backoff >= 1.0 && p.retry_backoff <= DLQ_RETRY_BACKOFF_MAX, "backoff %g", p.retry_backoff);
	FUZZ_CHECK(p.retry_jitter >= 0.0 && p.retry_jitter <= 1.0, "jitter %g", p.retry_jitter);
	/* Every attempt's delay stays within the cap. */
	for(unsigned a = 1; a <= 3; a++){
		uint64_t ms = policy__retry_delay_ms(&p, a, -1, 0.999);
		FUZZ_CHECK(ms <= p.retry_max_delay_ms, "delay %llu over the cap", (unsigned long long)ms);
	}
	FUZZ_CHECK(policy__retry_delay_ms(&p, p.max_attempts, -1, 0.0) <= p.retry_max_delay_ms, "delay over the cap");
	p.source = strdup("fuzz");
	FUZZ_CHECK(policy__table_add(&t, &p) == 0, "table_add");
	fuzz_check_finish(&t);
	policy__table_free(&t);
	free(line);
	return 0;
}
