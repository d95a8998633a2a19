/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Checks of a control message's client-controlled text (see
 * control_input.h). The NUL scan reads the JSON text itself, because cJSON
 * keeps no length for a string: once decoded, "5ms\u0000" and "5ms" are
 * the same C string.
 */
#include <stdio.h>
#include <string.h>

#include "api/control_input.h"
#include "util/errtext.h"
#include "util/topic.h"

/* How much of a member name an error message quotes. */
#define NAME_MAX_BYTES 64

/* A command's members are at this depth (the document's object is 1, its
 * "commands" array 2): a NUL deeper down is named after the member of the
 * command it is in. */
#define COMMAND_DEPTH 3

const char *control_input__topic_problem(const char *topic)
{
	if(topic == NULL || topic[0] == '\0') return "is empty";
	size_t len = strlen(topic);
	if(errtext__utf8_check(topic, len) != len) return "is not valid UTF-8";
	if(len > 65535) return "is longer than 65535 bytes";
	if(!topic__valid_publish(topic)) return "contains a wildcard (+ or #)";
	return NULL;
}

/* Scans the string token that starts after the quote at s[*i - 1]: leaves
 * *i past its closing quote and says whether an escape in it is \u0000. */
static bool string_has_nul(const char *s, size_t len, size_t *i)
{
	bool nul = false;
	size_t k = *i;
	while(k < len && s[k] != '"'){
		if(s[k] == '\\' && k + 1 < len){
			if(s[k + 1] == 'u' && k + 5 < len && !memcmp(s + k + 2, "0000", 4)) nul = true;
			k += 2; /* an escaped quote or backslash does not end the string */
		}else{
			k++;
		}
	}
	*i = k < len ? k + 1 : k;
	return nul;
}

/* Finds the first string holding \u0000 and writes the name of the member
 * it belongs to into name (NAME_MAX_BYTES + 1 bytes). The text need not be
 * valid JSON: cJSON decides that afterwards. */
static bool find_nul(const char *s, size_t len, char name[NAME_MAX_BYTES + 1])
{
	/* The member name last seen at each depth from 1 to COMMAND_DEPTH. */
	const char *keys[COMMAND_DEPTH] = {0};
	size_t key_lens[COMMAND_DEPTH] = {0};
	size_t depth = 0;
	size_t i = 0;
	while(i < len){
		char c = s[i++];
		if(c == '{' || c == '['){
			depth++;
			if(depth <= COMMAND_DEPTH) keys[depth - 1] = NULL;
		}else if(c == '}' || c == ']'){
			if(depth) depth--;
		}else if(c == '"'){
			size_t start = i;
			bool nul = string_has_nul(s, len, &i);
			size_t end = i > start ? i - 1 : start;
			size_t j = i;
			while(j < len && errtext__is_space(s[j])) j++;
			bool is_key = j < len && s[j] == ':';
			if(is_key && depth >= 1 && depth <= COMMAND_DEPTH){
				keys[depth - 1] = s + start;
				key_lens[depth - 1] = end - start;
			}
			if(!nul) continue;
			const char *k = is_key ? s + start : NULL;
			size_t k_len = is_key ? end - start : 0;
			for(size_t d = depth < COMMAND_DEPTH ? depth : COMMAND_DEPTH; k == NULL && d > 0; d--){
				k = keys[d - 1];
				k_len = key_lens[d - 1];
			}
			errtext__clean(k ? k : "a string", k ? k_len : strlen("a string"), name, NAME_MAX_BYTES);
			return true;
		}
	}
	return false;
}

bool control_input__check_json(const char *payload, size_t len, char *err, size_t errlen)
{
	size_t bad = errtext__utf8_check(payload, len);
	if(bad < len){
		if(payload[bad] == '\0'){
			snprintf(err, errlen, "payload holds a NUL byte (at byte %zu)", bad);
		}else{
			snprintf(err, errlen, "payload is not valid UTF-8 (at byte %zu)", bad);
		}
		return false;
	}
	char name[NAME_MAX_BYTES + 1];
	if(find_nul(payload, len, name)){
		snprintf(err, errlen, "\"%s\" must not contain a NUL character (\\u0000)", name);
		return false;
	}
	return true;
}
