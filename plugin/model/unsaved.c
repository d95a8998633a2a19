/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the broker took and has not saved yet (see unsaved.h): the list and
 * the look at the broker's database file. What goes in and when it leaves
 * is the engine's (engine/taken.c).
 */
#include <string.h>
#include <sys/stat.h>

#include "model/envelope.h"
#include "model/unsaved.h"

void unsaved__init(struct dlq_unsaved *u)
{
	memset(u, 0, sizeof(*u));
}

void unsaved__cleanup(struct dlq_unsaved *u)
{
	struct dlq_envelope *e = u->list.head;
	while(e){
		struct dlq_envelope *next = e->next;
		envelope__free(e);
		e = next;
	}
	memset(u, 0, sizeof(*u));
}

/* Whether the file at path differs from the last look (a save replaced
 * it); records what it looks like now. A file that cannot be read counts
 * as absent: its appearance is a save, its disappearance is not. */
bool unsaved__file_changed(struct dlq_unsaved *u, const char *path)
{
	struct stat st;
	if(stat(path, &st) != 0){
		u->present = false;
		return false;
	}
	bool changed = !u->present || st.st_dev != u->dev || st.st_ino != u->ino || st.st_size != u->size
			|| st.st_mtim.tv_sec != u->mtime.tv_sec || st.st_mtim.tv_nsec != u->mtime.tv_nsec;
	u->present = true;
	u->dev = st.st_dev;
	u->ino = st.st_ino;
	u->size = st.st_size;
	u->mtime = st.st_mtim;
	return changed;
}

void unsaved__push(struct dlq_unsaved *u, struct dlq_envelope *e)
{
	e->next = NULL;
	e->prev = u->list.tail;
	if(u->list.tail) u->list.tail->next = e;
	else u->list.head = e;
	u->list.tail = e;
	u->list.count++;
	u->bytes += e->bytes;
}
