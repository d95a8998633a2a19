/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Child processes for the integration tests: the built dlqctl (path in
 * DLQCTL, set by meson) run against a harness broker, or any program (the
 * example workers), with its output captured, in the foreground or in the
 * background to be waited for or killed; plus the broker-side helpers the
 * tool, bridge and worker tests need (dlqctl's output on a terminal too):
 * a free loopback TCP port, waiting for
 * a line in a broker's log, and sending a broker a signal. A child dies with
 * its test's process (PDEATHSIG).
 */
#ifndef DLQ_IT_PROC_H
#define DLQ_IT_PROC_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

/* A process record belongs to the test that started it: proc_free frees it
 * (killing the process if it still runs), and the checked fixture frees
 * every record the test did not, so tests need not. Pointers returned by
 * proc_out and proc_err are valid until then. */
struct proc;

/* Starts "$DLQCTL --unix <b's socket> args..." in the background. */
#define dlqctl_spawn(b, ...) dlqctl_spawn_at(__FILE__, __LINE__, (b), __VA_ARGS__, (const char *)NULL)
struct proc *dlqctl_spawn_at(const char *file, int line, struct broker *b, ...);

/* Like dlqctl_spawn, with its standard output a terminal: the slave of a
 * new pseudo-terminal, in raw mode so that what dlqctl writes arrives as
 * it wrote it (no "\r\n" for "\n"), whose master the test reads as it
 * reads a pipe (proc_out); its standard error is a pipe as ever. */
/* Whether this machine gives pseudo-terminals (a chroot without devpts
 * mounted does not); if not, why (openpty's error) into why. */
bool proc_tty_available(char *why, size_t len);

#define dlqctl_spawn_tty(b, ...) dlqctl_spawn_tty_at(__FILE__, __LINE__, (b), __VA_ARGS__, (const char *)NULL)
struct proc *dlqctl_spawn_tty_at(const char *file, int line, struct broker *b, ...);

/* The value of the environment variable name, which meson sets; fails the
 * test when it is unset or empty. */
const char *proc_env_or_fail(const char *name);

/* Appends to argv, from *n, the command that runs an example worker: example
 * is its path under $DLQ_EXAMPLES, "python/NAME.py" (run by $PYTHON3) or
 * "node/NAME.js" (by $NODE, once `npm ci` has installed its mqtt package, or
 * the test fails saying so). script (size bytes) receives the script's path,
 * which argv then borrows. */
void proc_example_command(const char *example, char *script, size_t size, const char **argv, size_t *n);

/* Starts any program in the background: argv ends with NULL and argv[0] is
 * an absolute path (no PATH lookup). */
#define proc_spawn(argv) proc_spawn_at(__FILE__, __LINE__, (argv))
struct proc *proc_spawn_at(const char *file, int line, const char *const *argv);

/* Runs "$DLQCTL --unix <b's socket> args..." to its end, failing the test
 * (with its output) if it takes longer than HARNESS_WAIT_MS. Returns the
 * finished process: see proc_status, proc_out, proc_err. */
#define dlqctl_run(b, ...) dlqctl_run_at(__FILE__, __LINE__, (b), __VA_ARGS__, (const char *)NULL)
struct proc *dlqctl_run_at(const char *file, int line, struct broker *b, ...);

/* Like dlqctl_run, and fails the test (printing its output) unless the
 * exit status is want. */
#define dlqctl_expect(want, b, ...) dlqctl_expect_at(__FILE__, __LINE__, (want), (b), __VA_ARGS__, (const char *)NULL)
struct proc *dlqctl_expect_at(const char *file, int line, int want, struct broker *b, ...);

/* Waits for the process to end, failing the test after timeout_ms. Returns
 * its exit status, or 128 + the signal that killed it. */
#define proc_wait(p, timeout_ms) proc_wait_at(__FILE__, __LINE__, (p), (timeout_ms))
int proc_wait_at(const char *file, int line, struct proc *p, int timeout_ms);

/* Whether the process has ended, without waiting: it is then reaped and
 * proc_status says how; what it wrote may still be in the pipes (proc_wait
 * returns at once and reads it all). */
bool proc_ended(struct proc *p);

/* Waits until its standard output holds needle at least n times; returns
 * whether it did within timeout_ms (it may end meanwhile). */
bool proc_wait_output(struct proc *p, const char *needle, size_t n, int timeout_ms);

/* The same for its standard error. */
bool proc_wait_error(struct proc *p, const char *needle, size_t n, int timeout_ms);

/* Reads what the process wrote so far without waiting, so that proc_out
 * and proc_err are up to date. */
void proc_pump(struct proc *p);

/* Sends sig to the process (it must not have been waited for). */
void proc_kill(struct proc *p, int sig);

/* Exit status of a finished process (as proc_wait returns it), its standard
 * output and error so far (owned by p). */
int proc_status(const struct proc *p);
const char *proc_out(struct proc *p);
const char *proc_err(struct proc *p);

/* Kills the process if it still runs, reaps it and frees its record and
 * output. NULL is ignored. */
void proc_free(struct proc *p);

/* Prints the command line and output to stderr, for failure messages. */
void proc_dump(struct proc *p);

/* How many times needle occurs in text. */
size_t it_count(const char *text, const char *needle);

/* The lines of text that contain needle, as a count, and the first such
 * line (copied into line, NUL-terminated) when line is not NULL. */
size_t it_lines_with(const char *text, const char *needle, char *line, size_t len);

/* A loopback TCP port that was free a moment ago (bound to port 0 and
 * released). */
int it_free_port(void);

/* Waits until the broker's log since its last start holds needle at least
 * n times; returns whether it did within timeout_ms. */
bool it_wait_log(const struct broker *b, const char *needle, size_t n, int timeout_ms);

/* Sends the broker a signal (SIGHUP: reload). */
#define it_signal_broker(b, sig) it_signal_broker_at(__FILE__, __LINE__, (b), (sig))
void it_signal_broker_at(const char *file, int line, struct broker *b, int sig);

#endif
