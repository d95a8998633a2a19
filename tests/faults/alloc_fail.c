/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The allocator wrappers of the fault-injection suite (see alloc_fail.h).
 * -Wl,--wrap=malloc makes every call to malloc in the linked objects call
 * __wrap_malloc, and __real_malloc the C library's (or the sanitizer's, or
 * valgrind's, which therefore still see every block).
 */
#include <errno.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "alloc_fail.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void __real_free(void *p);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void __wrap_free(void *p);

#define SLOTS (1u << 16)
#define TOMBSTONE ((void *)1)

struct slot {
	void *p;
	size_t size;
	void *site;
};

static struct {
	bool tracking;
	unsigned paused;
	unsigned long fail_at;
	unsigned long count;
	bool injected;
	char site[256];
	struct slot live[SLOTS];
	size_t nlive;
} af;

static size_t slot_of(const void *p)
{
	uintptr_t h = (uintptr_t)p;
	h ^= h >> 17;
	h *= 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 20) & (SLOTS - 1);
}

static void remember(void *p, size_t size, void *site)
{
	if(!af.tracking || p == NULL) return;
	for(size_t i = slot_of(p), k = 0; k < SLOTS; i = (i + 1) & (SLOTS - 1), k++){
		if(af.live[i].p == NULL || af.live[i].p == TOMBSTONE){
			af.live[i] = (struct slot){p, size, site};
			af.nlive++;
			return;
		}
	}
	fprintf(stderr, "alloc_fail: more than %u live allocations\n", SLOTS);
	abort();
}

static void forget(void *p)
{
	if(p == NULL) return;
	for(size_t i = slot_of(p), k = 0; k < SLOTS && af.live[i].p; i = (i + 1) & (SLOTS - 1), k++){
		if(af.live[i].p == p){
			af.live[i].p = TOMBSTONE;
			af.nlive--;
			return;
		}
	}
}

/* The name of the first frame that is neither this file nor cJSON. */
static void describe_site(char *out, size_t len)
{
	void *frames[12];
	int n = backtrace(frames, 12);
	char **names = backtrace_symbols(frames, n); /* libc's malloc: not wrapped */
	out[0] = '\0';
	for(int i = 1; names && i < n; i++){
		const char *s = strchr(names[i], '(');
		s = s ? s + 1 : names[i];
		if(!strncmp(s, "__wrap_", 7) || !strncmp(s, "fail_now", 8) || !strncmp(s, "cJSON", 5) || strstr(names[i], "libcjson")
				|| !strncmp(s, "describe_site", 13)){
			continue;
		}
		snprintf(out, len, "%.*s", (int)strcspn(s, ")"), s);
		break;
	}
	free(names);
}

/* Counts an allocation; true if this one is to fail. */
static bool fail_now(void)
{
	if(!af.tracking || af.paused || af.injected) return false;
	af.count++;
	if(af.count != af.fail_at) return false;
	af.injected = true;
	describe_site(af.site, sizeof(af.site));
	errno = ENOMEM; /* as glibc's allocator does */
	return true;
}

void *__wrap_malloc(size_t size)
{
	if(fail_now()) return NULL;
	void *p = __real_malloc(size);
	remember(p, size, __builtin_return_address(0));
	return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
	if(fail_now()) return NULL;
	void *p = __real_calloc(n, size);
	remember(p, n * size, __builtin_return_address(0));
	return p;
}

void *__wrap_realloc(void *old, size_t size)
{
	if(fail_now()) return NULL;
	void *p = __real_realloc(old, size);
	if(p){
		forget(old);
		remember(p, size, __builtin_return_address(0));
	}
	return p;
}

char *__wrap_strdup(const char *s)
{
	if(fail_now()) return NULL;
	char *p = __real_strdup(s);
	remember(p, strlen(s) + 1, __builtin_return_address(0));
	return p;
}

char *__wrap_strndup(const char *s, size_t n)
{
	if(fail_now()) return NULL;
	char *p = __real_strndup(s, n);
	remember(p, p ? strlen(p) + 1 : 0, __builtin_return_address(0));
	return p;
}

void __wrap_free(void *p)
{
	forget(p);
	__real_free(p);
}

void alloc_fail_start(unsigned long n)
{
	memset(&af, 0, sizeof(af));
	af.fail_at = n;
	af.tracking = true;
}

void alloc_fail_stop(void)
{
	af.fail_at = 0;
}

void alloc_fail_pause(void)
{
	af.paused++;
}

void alloc_fail_resume(void)
{
	af.paused--;
}

bool alloc_fail_injected(void)
{
	return af.injected;
}

unsigned long alloc_fail_count(void)
{
	return af.count;
}

const char *alloc_fail_site(void)
{
	return af.site;
}

size_t alloc_fail_live(bool *in_cjson)
{
	size_t n = af.nlive;
	*in_cjson = n > 0;
	for(size_t i = 0; i < SLOTS; i++){
		if(af.live[i].p && af.live[i].p != TOMBSTONE){
			char **name = backtrace_symbols(&af.live[i].site, 1);
			fprintf(stderr, "alloc_fail: leaked %zu bytes allocated at %s\n", af.live[i].size, name ? name[0] : "?");
			if(name == NULL || !strstr(name[0], "libcjson")) *in_cjson = false;
			free(name);
		}
	}
	af.tracking = false;
	return n;
}

void alloc_fail_hook_cjson(void)
{
	cJSON_Hooks hooks = { .malloc_fn = __wrap_malloc, .free_fn = __wrap_free };
	cJSON_InitHooks(&hooks);
	/* backtrace() loads libgcc on its first call: not in a scenario. */
	void *frame[1];
	backtrace(frame, 1);
}
