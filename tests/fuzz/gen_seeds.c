/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Writes the binary seeds of the state-file targets from a real engine, so
 * that they follow the format when it changes:
 *   fuzz_gen_seeds <corpus dir>   (tests/fuzz/corpus)
 * writes state_snapshot/{full,header-only,truncated} and
 * state_journal/{full,header-only,remove-only}. Not run by the tests; the
 * seeds it wrote are committed.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "state.h"

static void put(const char *dir, const char *target, const char *name, const uint8_t *data, size_t len)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s/%s", dir, target, name);
	FILE *fp = fopen(path, "wb");
	FUZZ_CHECK(fp != NULL, "%s: %s", path, strerror(errno));
	FUZZ_CHECK(fwrite(data, 1, len, fp) == len, "%s: short write", path);
	fclose(fp);
	printf("%s: %zu bytes\n", path, len);
}

int main(int argc, char **argv)
{
	struct dlq_headers snap = {0};
	struct dlq_headers journal = {0};
	struct dlq_headers remove = {0};

	if(argc != 2){
		fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
		return 2;
	}
	fuzz_make_snapshot(&snap);
	fuzz_make_journal(&journal);
	put(argv[1], "state_snapshot", "full", snap.data, snap.len);
	put(argv[1], "state_snapshot", "header-only", snap.data, 16);
	put(argv[1], "state_snapshot", "truncated", snap.data, snap.len - 7);
	put(argv[1], "state_journal", "full", journal.data, journal.len);
	put(argv[1], "state_journal", "header-only", journal.data, 8);
	FUZZ_CHECK(state__encode_journal_header(&remove) == 0 && state__encode_remove(1, &remove) == 0
			&& state__encode_remove(3, &remove) == 0, "journal");
	put(argv[1], "state_journal", "remove-only", remove.data, remove.len);
	headers__free(&snap);
	headers__free(&journal);
	headers__free(&remove);
	return 0;
}
