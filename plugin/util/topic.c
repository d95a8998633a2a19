/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * MQTT topic names and filters (see topic.h): validation as MQTT 3.1.1 and 5
 * define it, and the reference matcher. The policy table's trie implements
 * the same matching rules for the hot path; this file is what configuration
 * checks and tests hold it to. A string is refused when Mosquitto would refuse
 * it on the wire too (mosquitto_validate_utf8: malformed UTF-8, surrogates,
 * control characters, non-characters), since such a topic can never arrive.
 */
#include <stdint.h>
#include <string.h>

#include "mosquitto_dlq.h"
#include "util/topic.h"

#define TEXT_OF_(x) #x
#define TEXT_OF(x) TEXT_OF_(x)

#define TOPIC_MAX_BYTES 65535

/* Length of s if it is 1..TOPIC_MAX_BYTES bytes of UTF-8 that Mosquitto
 * accepts in a topic, else 0. */
static size_t checked_len(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	if(s == NULL) return 0;
	while(u[i]){
		uint32_t cp;
		size_t n;

		/* Printable ASCII, nearly every topic's every byte, at once. */
		if(u[i] - 0x20u < 0x5Fu){
			i++;
			continue;
		}
		if(i >= TOPIC_MAX_BYTES) return 0;
		if(u[i] < 0x80){
			cp = u[i];
			n = 1;
		}else if(u[i] >= 0xC2 && u[i] <= 0xDF){
			cp = u[i] & 0x1F;
			n = 2;
		}else if((u[i] & 0xF0) == 0xE0){
			cp = u[i] & 0x0F;
			n = 3;
		}else if(u[i] >= 0xF0 && u[i] <= 0xF4){
			cp = u[i] & 0x07;
			n = 4;
		}else{
			return 0; /* continuation byte, C0/C1 or beyond U+10FFFF */
		}
		for(size_t j = 1; j < n; j++){
			/* A NUL terminator fails this test too, so no overrun. */
			if((u[i+j] & 0xC0) != 0x80) return 0;
			cp = (cp << 6) | (u[i+j] & 0x3F);
		}
		if((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
		if(cp >= 0xD800 && cp <= 0xDFFF) return 0;
		if(cp >= 0xFDD0 && cp <= 0xFDEF) return 0;
		if((cp & 0xFFFF) == 0xFFFE || (cp & 0xFFFF) == 0xFFFF) return 0;
		if(cp <= 0x1F || (cp >= 0x7F && cp <= 0x9F)) return 0;
		i += n;
	}
	if(i > TOPIC_MAX_BYTES) return 0;
	return i;
}

bool topic__valid_filter(const char *f)
{
	size_t len = checked_len(f);

	if(len == 0) return false;
	for(size_t i = 0; i < len; i++){
		if(f[i] != '+' && f[i] != '#') continue;
		/* A wildcard fills its whole level: '/' or an end on both sides. */
		if(i > 0 && f[i-1] != '/') return false;
		if(f[i] == '+' && f[i+1] != '\0' && f[i+1] != '/') return false;
		if(f[i] == '#' && f[i+1] != '\0') return false;
	}
	return true;
}

bool topic__valid_publish(const char *t)
{
	size_t len = checked_len(t);

	if(len == 0) return false;
	return strpbrk(t, "+#") == NULL;
}

bool topic__matches(const char *filter, const char *topic)
{
	if(!topic__valid_filter(filter) || !topic__valid_publish(topic)) return false;
	return topic__matches_valid(filter, topic);
}

bool topic__matches_valid(const char *filter, const char *topic)
{
	const char *f = filter;
	const char *t = topic;

	/* MQTT-4.7.2-1: a filter starting with a wildcard does not match a
	 * topic starting with '$'. */
	if(topic[0] == '$' && (filter[0] == '+' || filter[0] == '#')) return false;

	/* Walk level by level; f and t each point at the start of a level.
	 * Character by character: levels are short, and a call per level
	 * (strcspn, memcmp) cost a NACK on 2.1, which matches its copy's
	 * topic against the subscriber's filters, more than the walk. */
	for(;;){
		if(f[0] == '#') return true; /* the rest, however many levels */
		if(f[0] == '+'){
			while(*t != '/' && *t != '\0') t++;
			f++;
		}else{
			while(*f != '/' && *f != '\0'){
				if(*f != *t) return false;
				f++;
				t++;
			}
			if(*t != '/' && *t != '\0') return false;
		}
		/* Both at '/' or '\0' now. */
		if(*t == '\0'){
			/* "a/#" matches "a": the '#' also stands for its parent. */
			if(*f == '\0') return true;
			return strcmp(f, "/#") == 0;
		}
		if(*f == '\0') return false;
		f++;
		t++;
	}
}

/* Whether what is left of a filter, at the end of the other one's last
 * level, still matches that level's topic: nothing, or "/#" ("a/#"
 * matches "a"). */
static bool rest_matches_parent(const char *rest)
{
	return *rest == '\0' || strcmp(rest, "/#") == 0;
}

bool topic__filters_overlap(const char *a, const char *b)
{
	if(!topic__valid_filter(a) || !topic__valid_filter(b)) return false;
	/* MQTT-4.7.2-1: a topic starting with '$' is matched by neither
	 * filter's leading wildcard, so a leading wildcard meets only a first
	 * level that does not start with '$'. Two leading wildcards still meet
	 * on a topic without '$'. */
	bool wa = a[0] == '+' || a[0] == '#';
	bool wb = b[0] == '+' || b[0] == '#';
	if((wa && !wb && b[0] == '$') || (wb && !wa && a[0] == '$')) return false;

	/* Walk level by level; a and b each point at the start of a level. */
	for(;;){
		if(a[0] == '#' || b[0] == '#') return true;
		size_t al = strcspn(a, "/");
		size_t bl = strcspn(b, "/");
		/* '+' takes any one level, the other's included (empty too). */
		if(a[0] != '+' && b[0] != '+' && (al != bl || memcmp(a, b, al))) return false;
		a += al;
		b += bl;
		/* Both at '/' or '\0' now. */
		if(*a == '\0') return rest_matches_parent(b);
		if(*b == '\0') return rest_matches_parent(a);
		a++;
		b++;
	}
}

const char *topic__shared_filter(const char *f)
{
	static const char prefix[] = "$share/";
	const size_t plen = sizeof(prefix) - 1;

	if(f == NULL || strncmp(f, prefix, plen)) return f;
	const char *slash = strchr(f + plen, '/');
	if(slash == NULL || slash == f + plen || slash[1] == '\0') return NULL;
	return slash + 1;
}

unsigned topic__wildcards(const char *filter)
{
	unsigned n = 0;

	/* In a valid filter '+' and '#' only ever stand alone in a level. */
	for(const char *p = filter; p && *p; p++){
		if(*p == '+' || *p == '#') n++;
	}
	return n;
}

const char *topic__broker_name_problem(const char *s)
{
	if(s == NULL || s[0] == '\0') return "it is empty";
	size_t n = 0;
	for(const unsigned char *p = (const unsigned char *)s; *p; p++, n++){
		if(n >= DLQ_MAX_BROKER_NAME_LEN) return "it is longer than " TEXT_OF(DLQ_MAX_BROKER_NAME_LEN) " bytes";
		if(*p == '/' || *p == '+' || *p == '#') return "it holds '/', '+' or '#' (it is one topic level, never a wildcard)";
		if(*p <= 0x20 || *p >= 0x7f) return "it holds a space, a control character or a byte outside printable ASCII";
	}
	return NULL;
}
