/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The words of the dead-letter causes (see cause.h): one table, in the
 * order of enum dlq_cause, read by the envelope's property, the status
 * reports and the $SYS topics alike.
 */
#include <stdio.h>
#include <string.h>

#include "model/cause.h"
#include "mosquitto_dlq.h"

static const char *const words[DLQ_DEAD_CAUSES] = {
	[DLQ_DEAD_UNKNOWN] = DLQ_CAUSE_UNKNOWN,
	[DLQ_DEAD_NACK] = DLQ_CAUSE_NACK,
	[DLQ_DEAD_FINAL] = DLQ_CAUSE_FINAL,
	[DLQ_DEAD_ACK_TIMEOUT] = DLQ_CAUSE_ACK_TIMEOUT,
	[DLQ_DEAD_REDELIVERY_LIMIT] = DLQ_CAUSE_REDELIVERY_LIMIT,
	[DLQ_DEAD_SUBSCRIBER_GONE] = DLQ_CAUSE_SUBSCRIBER_GONE,
	[DLQ_DEAD_NO_SESSION] = DLQ_CAUSE_NO_SESSION,
	[DLQ_DEAD_OFFLINE_QOS0] = DLQ_CAUSE_OFFLINE_QOS0,
	[DLQ_DEAD_RESTART] = DLQ_CAUSE_RESTART,
};

const char *cause__name(unsigned c)
{
	return c < DLQ_DEAD_CAUSES ? words[c] : DLQ_CAUSE_UNKNOWN;
}

bool cause__parse(const char *name, enum dlq_cause *out)
{
	for(unsigned c = 0; name && c < DLQ_DEAD_CAUSES; c++){
		if(!strcmp(name, words[c])){
			*out = (enum dlq_cause)c;
			return true;
		}
	}
	return false;
}

/* The words in the documented order, as the public header lists them. */
static const char *const documented[] = { DLQ_CAUSE_WORDS };

void cause__words(char *buf, size_t size)
{
	size_t used = 0;
	if(size == 0) return;
	buf[0] = '\0';
	for(size_t i = 0; i < sizeof(documented) / sizeof(documented[0]) && used < size; i++){
		int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", documented[i]);
		if(n < 0) break;
		used += (size_t)n;
	}
}
