/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: the model of a delivery's life (tests/unit/delivery_model.h,
 * issue 45), its every choice read from the input instead of the unit
 * suite's seeded generator, so that coverage steers the sequences and they
 * run longer (up to MAX_STEPS events, where the unit suite runs 40). Any
 * input is a sequence:
 *
 *   byte 0        bit 0: the line (1: 2.1's rules, 0: 2.0's); bits 1-3:
 *                 which of the three clients' sessions last
 *   bytes 1-4     the seed of the engine's ids
 *   then          the choices of each step (model_step), in order: a byte
 *                 for a choice below 256, two (little-endian) for a larger
 *                 one (a tick's length), zeros once the input runs out
 *
 * Steps run while input is left; then the sequence is driven to
 * quiescence, where every chain must have ended ACKed or dead-lettered
 * exactly once. A broken invariant prints the steps and aborts.
 */
#include <stdlib.h>

#include "delivery_model.h"
#include "fuzz.h"
#include "fuzz_input.h"

#define MAX_STEPS 120

static struct fuzz_input in;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	model_verbose = getenv("FUZZ_TRACE") != NULL;
	return 0;
}

void model_failed(const char *what)
{
	(void)what; /* printed with the steps by MODEL_EXPECT */
	abort();
}

static unsigned from_input(unsigned n)
{
	unsigned v = fuzz_input_byte(&in);
	if(n > 256) v |= (unsigned)fuzz_input_byte(&in) << 8;
	return v % n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	in = (struct fuzz_input){.data = data, .len = size};
	uint8_t first = fuzz_input_byte(&in);
	uint32_t seed = fuzz_input_u32(&in);
	model.below = from_input;
	model_begin(seed, first & 1, (first >> 1) & 7);
	for(model.step = 1; model.step <= MAX_STEPS && fuzz_input_more(&in); model.step++){
		model_step();
		model_check();
	}
	model_end();
	model.below = NULL;
	return 0;
}
