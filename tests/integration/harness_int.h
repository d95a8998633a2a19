/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * What the harness's files share and tests do not see: failing a test at the
 * caller's line, file helpers, and the hooks the checked fixture uses to
 * reset and clean up a test's brokers and clients.
 */
#ifndef DLQ_IT_HARNESS_INT_H
#define DLQ_IT_HARNESS_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "harness.h"

/* Fails the current test at the caller's file and line. */
#define fail_at(file, line, ...) _ck_assert_failed((file), (line), "harness", __VA_ARGS__)

/* Topics of the clients' sync markers: "harness/sync/<client id>". */
#define SYNC_PREFIX "harness/sync/"

/* Allocation that aborts the test process on failure. */
void *harness__xmalloc(size_t n);
char *harness__xstrdup(const char *s);
/* A whole file, NUL-terminated (the caller frees it), or NULL. */
char *harness__read_file(const char *path);
/* Returns 0 or -1 with errno set. */
int harness__write_file(const char *path, const char *content);

/* Starts bin with argv (and envp, or when NULL this process' environment)
 * in a child whose standard input is /dev/null and whose output and errors
 * go to out_fd and err_fd, and which dies with this process (a test that
 * fails or crashes leaves nothing running). Returns the child's pid, or
 * fails the test at file:line. Everything the child needs is prepared by
 * the caller: only async-signal-safe calls happen between fork and exec. */
pid_t harness__spawn(const char *file, int line, const char *bin, char *const argv[], char *const envp[], int out_fd,
		int err_fd);
/* Removes a directory that holds only files (a broker's). */
void harness__remove_flat_dir(const char *dir);
/* The run directory made by harness_init; each broker's is inside it. */
const char *harness__run_dir(void);

/* broker.c: forget the brokers of a previous test (fixture setup). */
void broker__reset(void);
/* Stops and frees every broker of the test, removing the directories of
 * those that ended as they should. Returns false, with what went wrong in
 * problems, if any did not (their directories stay for harness_finish). */
bool broker__stop_all(char *problems, size_t len);
/* ", and broker <label> <exited ...>" if b is no longer running, else "". */
void broker__health(struct broker *b, char *buf, size_t len);

/* client.c: forget the clients of a previous test (fixture setup). */
void client__reset(void);
/* Disconnects and frees every client of the test. */
void client__free_all(void);

/* proc.c: forget the processes of a previous test (fixture setup); kill
 * and free every process record of the test (proc_free). */
void proc__reset(void);
void proc__free_all(void);

/* flood.c: the same for the test's flooding clients (flood_free). */
void flood__reset(void);
void flood__free_all(void);

/* harness.c: waits on cond (mutex held) until deadline (monotonic ms);
 * false once the deadline has passed. */
bool it__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline);

/* message.c: a received message, decoded and copied; msg__free frees it. */
struct it_msg *msg__decode(const struct mosquitto_message *mm, const mosquitto_property *props);
void msg__free(struct it_msg *m);
/* Frees the n user properties of users and the array (what msg__free and
 * raw_packet.c's packet__msg_free do for their messages' lists). */
void msg__users_free(struct it_user_prop *users, size_t n);
/* One line describing m, for failure output. */
void msg__print(FILE *f, size_t index, const struct it_msg *m);

#endif
