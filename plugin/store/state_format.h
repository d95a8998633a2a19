/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The state file format (see state.h), shared by its writer (state.c) and
 * its reader (state_read.c). A file is a header, then entries:
 *   type (1) | length (4, big endian) | body (length) | CRC-32 (4) of all before it in the entry
 * Snapshot header "DLQSTAT1", then the next envelope sequence number (8);
 * entries are records (type 1) and envelopes (type 2), and a last entry
 * (type 4) holding how many came before it, so that a file cut between two
 * entries is known to be cut. Journal header
 * "DLQJRNL1"; entries add an envelope (type 2) or remove one by its
 * sequence number (type 3). A client that settled its delivery of a record
 * (type 5: a NACK, an ACK, or its deadline passing; how, a byte at the end,
 * absent in files written before ACKs and meaning a NACK) is journaled as
 * it happens, and a snapshot's record entry lists its settlers (their ids,
 * then how each settled, also absent in older files). A record held for a
 * client (type 6, holds.h) follows its record in a snapshot and is
 * journaled as it happens; a hold whose client is among the record's
 * settlers is over. A delivery's counts (type 7,
 * model/deliveries.h: a client, 2.0's redeliveries, 2.1's sends, whether
 * it was held while connected or diverted) follow their record in a
 * snapshot and are journaled as they change, a later entry replacing an
 * earlier one. An envelope entry ends with a dead letter's cause (a byte,
 * model/cause.h; 0 for a retry copy), absent in files written before
 * causes: such a dead letter reads as a final NACK's if its flags say so,
 * else of cause unknown (0). A dead letter's cause is followed by its
 * broker's name (a string; empty for a retry copy), absent in files written
 * before broker names: such a dead letter reads as the restoring broker's
 * (state_view's broker_name). A kept dead letter (type 8, model/letters.h: its body
 * that of an envelope entry, of kind dead letter) follows the envelopes in
 * a snapshot, oldest first, and is journaled when it is kept; a letter that
 * left the store (type 9: its 12 raw id bytes) only in the journal. A
 * delivery awaiting settlement within an ack_timeout (type 10,
 * model/deadlines.h: its record's id, its client, when its clock runs out
 * or 0 while it has none) follows every record in a snapshot, each
 * client's in their order, and is journaled when its clock starts; a later
 * entry replaces an earlier one, and its settlement (type 5) ends it. Times
 * are saved as wall-clock milliseconds and turned back into the monotonic
 * clock on restore. Journals come in generations (persist.c: the snapshot
 * being written in the background holds what the journals up to its
 * generation said, while the next journal goes on): a journal's first entry
 * (type 11) gives its generation, and a snapshot's (type 11, after the
 * header) the last generation it holds; a journal of that generation or
 * older is not applied over it. Files written before generations have
 * none: such a journal is always applied, such a snapshot holds none.
 * A policy's rate history (type 13, model/history.h: its filter, how many
 * causes a minute counts, how many minutes, then each minute that holds
 * anything, oldest first: its start in Unix seconds (8), NACKs, ack
 * timeouts, redrives and the dead letters of each cause (4 each)) follows
 * the kept dead letters in a snapshot, one per policy with any; it is
 * never journaled. Files written before it have none.
 * A redrive task (type 12, model/redrive_task.h: id (8), state (1), rate
 * (4), started and ended wall-clock ms (8 each), moved, failed, left (8
 * each), which of cause, since and until its filter has (1: bits 1, 2,
 * 4), cause (1), since and until (8 each), then its filter, dead-letter
 * topic, reason part, target topic and client as strings, empty for none,
 * then its filter's broker name (empty for none; absent in files written
 * before broker names), then where a running task is (1, enum task_place;
 * for TASK_PLACE_AT the 12 raw id bytes of the kept letter it tries next
 * follow; absent for TASK_PLACE_OLDEST, and in files written before
 * places: such a task starts again from the oldest letter) follows the
 * kept letters in a snapshot, oldest first, and is journaled when it
 * starts, ends or makes progress; a later entry replaces an earlier one of
 * the same id, and the letters a later entry removes move a restored
 * task's place on past them, as they move a running one. Files written
 * before tasks have none.
 */
#ifndef DLQ_STATE_FORMAT_H
#define DLQ_STATE_FORMAT_H

#define SNAPSHOT_MAGIC "DLQSTAT1"
#define JOURNAL_MAGIC "DLQJRNL1"
#define MAGIC_LEN 8

enum entry_type { ENTRY_RECORD = 1, ENTRY_ENVELOPE = 2, ENTRY_REMOVE = 3, ENTRY_END = 4, ENTRY_SETTLER = 5, ENTRY_HOLD = 6,
	ENTRY_DELIVERY = 7, ENTRY_LETTER = 8, ENTRY_LETTER_GONE = 9, ENTRY_DEADLINE = 10, ENTRY_GENERATION = 11,
	ENTRY_TASK = 12, ENTRY_HISTORY = 13 };

/* Where a redrive task is in the kept letters (its cursor): so that after
 * a restart it goes on after the letters it tried, those it failed
 * included, instead of trying (and counting) them again. */
enum task_place {
	TASK_PLACE_OLDEST = 0, /* it has not walked yet (or it ended): from the oldest */
	TASK_PLACE_AT = 1,     /* at the letter whose id follows */
	TASK_PLACE_END = 2,    /* past the newest: it ends at its next step */
};

#endif
