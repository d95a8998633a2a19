/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A main() for a fuzz target without libFuzzer: runs the target's entry point
 * once over every file named on the command line, or over every file in a
 * directory named there (sorted by name). Built with the ordinary compiler, it
 * lets `meson test --suite fuzz-regressions` keep the seed corpus and every
 * input that once crashed a target as regression tests; a target that still
 * crashes aborts this program, which fails the test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if(fp == NULL){
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t got;
	while(buf && (got = fread(buf + len, 1, cap - len, fp)) > 0){
		len += got;
		if(len == cap){
			uint8_t *b = realloc(buf, cap *= 2);
			if(b == NULL) free(buf);
			buf = b;
		}
	}
	fclose(fp);
	if(buf == NULL){
		fprintf(stderr, "replay: %s: out of memory\n", path);
		return 1;
	}
	/* An exact-size copy, as libFuzzer hands inputs over, so that a read
	 * past the end is caught by ASan or valgrind. */
	uint8_t *exact = malloc(len ? len : 1);
	if(exact && len) memcpy(exact, buf, len);
	free(buf);
	if(exact == NULL) return 1;
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file in dir, sorted; *count files. A missing directory is
 * empty (a target may have no regressions yet). */
static int run_dir(const char *dir, size_t *count)
{
	DIR *dp = opendir(dir);
	if(dp == NULL) return errno == ENOENT ? 0 : 1;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int rc = 0;
	while((de = readdir(dp)) != NULL){
		if(de->d_name[0] == '.') continue;
		if(n == cap){
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if(nn == NULL){
				rc = 1;
				break;
			}
			names = nn;
		}
		size_t len = strlen(dir) + strlen(de->d_name) + 2;
		names[n] = malloc(len);
		if(names[n] == NULL){
			rc = 1;
			break;
		}
		snprintf(names[n], len, "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(dp);
	qsort(names, n, sizeof(*names), by_name);
	for(size_t i = 0; i < n; i++){
		struct stat st;
		if(rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)){
			rc = run_file(names[i]);
			(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	size_t count = 0;
	int rc = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for(int i = 1; i < argc && rc == 0; i++){
		struct stat st;
		if(stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)){
			rc = run_dir(argv[i], &count);
		}else if(stat(argv[i], &st) == 0){
			rc = run_file(argv[i]);
			count++;
		}else if(errno != ENOENT){
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			rc = 1;
		}
	}
	if(rc == 0) printf("replay: %zu inputs, no crash\n", count);
	return rc;
}
