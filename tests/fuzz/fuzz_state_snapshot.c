/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: the state snapshot decoder (state_read__decode_snapshot) into a
 * fresh engine with the standard configuration. The target rewrites every
 * entry's CRC before decoding, so that mutations reach the entry decoders
 * (a checksum mismatch is tested by the unit tests); then it checks the
 * restored engine (fuzz_state.c).
 */
#include <string.h>

#include "fake_port.h"
#include "fuzz_state_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlq d;
	struct state_report rep;
	uint8_t *copy = fuzz_state_begin(&d, &rep, data, size, 16);

	if(copy == NULL) return 0;
	int rc = state_read__decode_snapshot(engine__state_view(&d), copy, size, fake.now_ms, fake.wall_ms, &rep);
	FUZZ_CHECK(rc == 0, "state_read__decode_snapshot: %d", rc);
	free(copy);
	fuzz_state_exercise(&d, &rep, 0);
	return 0;
}
