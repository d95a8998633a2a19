/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: the journal decoder (state_read__decode_journal), applied to an
 * engine freshly restored from a fixed snapshot (fuzz_make_snapshot: records,
 * owed and delayed envelopes), so that "remove" entries find envelopes to
 * remove and "add" entries meet ones already there. CRCs are rewritten as in
 * the snapshot target; the restored engine is then checked (fuzz_state.c).
 */
#include <string.h>

#include "fake_port.h"
#include "fuzz_state_common.h"

static struct dlq_headers base;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if(base.len == 0) fuzz_make_snapshot(&base);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlq d;
	struct state_report rep;

	if(base.len == 0) LLVMFuzzerInitialize(NULL, NULL);
	uint8_t *copy = fuzz_state_begin(&d, &rep, data, size, 8);
	if(copy == NULL) return 0;
	FUZZ_CHECK(state_read__decode_snapshot(engine__state_view(&d), base.data, base.len, fake.now_ms, fake.wall_ms, &rep) == 0, "base snapshot");
	FUZZ_CHECK(!rep.damaged && rep.envelopes > 0 && rep.records > 0, "base snapshot: %s", rep.problem);
	size_t before = fuzz_owed_count(&d);
	memset(&rep, 0, sizeof(rep));
	int rc = state_read__decode_journal(engine__state_view(&d), copy, size, fake.now_ms, fake.wall_ms, &rep);
	FUZZ_CHECK(rc == 0, "state_read__decode_journal: %d", rc);
	free(copy);
	fuzz_state_exercise(&d, &rep, before);
	return 0;
}
