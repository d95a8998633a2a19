/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: a JSON policy document (policy_parse__json), the
 * content of plugin_opt_policy_file. A refused document must leave the table
 * as it was and say why; an accepted one is validated as a whole and, when
 * that passes, its trie must agree with a plain walk over the filters.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "model/policy.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlq_policy_table t = {0};
	char err[1024];

	/* An exact copy: cJSON must not read past len (the file has no NUL). */
	char *text = malloc(size ? size : 1);
	if(text == NULL) return 0;
	memcpy(text, data, size);
	err[0] = '\0';
	int rc = policy_parse__json(text, size, "fuzz.json", &t, err, sizeof(err));
	if(rc){
		FUZZ_CHECK(rc == EINVAL, "rc %d", rc);
		FUZZ_CHECK(err[0] != '\0', "refused without a message");
		FUZZ_CHECK(t.count == 0, "refused, but %zu policies were kept", t.count);
	}else{
		for(size_t i = 0; i < t.count; i++){
			FUZZ_CHECK(t.items[i].filter && t.items[i].dead_letter && t.items[i].source, "policy %zu incomplete", i);
		}
		fuzz_check_finish(&t);
	}
	policy__table_free(&t);
	free(text);
	return 0;
}
