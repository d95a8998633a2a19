/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The members of a command that say which kept letters it takes (see
 * letter_filter.h): one parser for listDeadLetters and startRedriveTask,
 * each member checked and refused with its name and the reason.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api/letter_filter.h"
#include "model/cause.h"
#include "util/errtext.h"
#include "util/topic.h"

/* A time member: absent (*given false), ms since the epoch or RFC 3339 text. */
static int time_member(const cJSON *cmd, const char *name, bool *given, int64_t *out, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cmd, name);
	*given = false;
	if(v == NULL || cJSON_IsNull(v)) return 0;
	if(cJSON_IsNumber(v) && isfinite(v->valuedouble) && fabs(v->valuedouble) < 9.0e15){
		*out = (int64_t)v->valuedouble;
	}else if(!cJSON_IsString(v) || !envelope__parse_time(v->valuestring, out)){
		errtext__set(err, errlen, "\"%s\" must be milliseconds since the epoch or RFC 3339 UTC text, "
				"e.g. \"2026-12-02T10:00:00Z\"", name);
		return EINVAL;
	}
	*given = true;
	return 0;
}

/* A string member: absent gives NULL. */
int letter_filter__string(const cJSON *cmd, const char *name, const char **out, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cmd, name);
	*out = NULL;
	if(v == NULL || cJSON_IsNull(v)) return 0;
	if(!cJSON_IsString(v)){
		errtext__set(err, errlen, "\"%s\" must be a string", name);
		return EINVAL;
	}
	*out = v->valuestring;
	return 0;
}

/* The "cause" member: absent (*given false), or one word of the
 * dead-letter causes; an unknown word is refused with every known one. */
static int cause_member(const cJSON *cmd, bool *given, enum dlq_cause *out, char *err, size_t errlen)
{
	const char *word;
	*given = false;
	if(letter_filter__string(cmd, "cause", &word, err, errlen)) return EINVAL;
	if(word == NULL) return 0;
	if(!cause__parse(word, out)){
		char words[DLQ_CAUSE_WORDS_LEN];
		cause__words(words, sizeof(words));
		errtext__set(err, errlen, "\"cause\" " QFMT " is not a dead-letter cause: it must be one of %s", Q(word), words);
		return EINVAL;
	}
	*given = true;
	return 0;
}

/* The "broker" member: absent (NULL), or a name a broker can have
 * (topic__broker_name_problem): another matches no letter, and a task
 * saved with it could not be read back the same (an empty one reads as
 * none). */
static int broker_member(const cJSON *cmd, const char **out, char *err, size_t errlen)
{
	if(letter_filter__string(cmd, "broker", out, err, errlen)) return EINVAL;
	const char *why = *out ? topic__broker_name_problem(*out) : NULL;
	if(why){
		errtext__set(err, errlen, "\"broker\" " QFMT " is not a broker's name: %s", Q(*out), why);
		*out = NULL;
		return EINVAL;
	}
	return 0;
}

/* A member that names a policy's filter or dead-letter topic: absent
 * (NULL), or not empty. An empty one would match no letter (each has both),
 * and a redrive task saved with it would be read back as without it (the
 * state file writes none as empty), and then take every letter. */
static int topic_member(const cJSON *cmd, const char *name, const char **out, char *err, size_t errlen)
{
	if(letter_filter__string(cmd, name, out, err, errlen)) return EINVAL;
	if(*out && (*out)[0] == '\0'){
		errtext__set(err, errlen, "\"%s\" must not be empty: leave it out to match every one", name);
		*out = NULL;
		return EINVAL;
	}
	return 0;
}

int letter_filter__parse(const cJSON *cmd, struct dlq_letter_match *m, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	if(topic_member(cmd, "filter", &m->filter, err, errlen)
			|| topic_member(cmd, "deadLetter", &m->dead_letter, err, errlen)
			|| letter_filter__string(cmd, "reason", &m->reason, err, errlen)
			|| broker_member(cmd, &m->broker, err, errlen)
			|| cause_member(cmd, &m->cause_given, &m->cause, err, errlen)
			|| time_member(cmd, "since", &m->since_given, &m->since, err, errlen)
			|| time_member(cmd, "until", &m->until_given, &m->until, err, errlen)){
		return EINVAL;
	}
	return 0;
}
