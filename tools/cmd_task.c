/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * dlqctl redrive --all: a redrive task of the plugin (startRedriveTask on
 * $CONTROL/dlq/v1), which moves every kept dead letter the selection
 * options match (those of list: --filter, --dead-letter, --reason,
 * --cause, --since, --until) to its origin topic, or --to TOPIC, at --rate
 * letters a second (default 100, at most 10,000), and then follows it
 * through getStatus until it ends: a progress bar on a terminal, a plain
 * line a second otherwise (and with --json the task's JSON when it ends).
 * The task runs in the broker: Ctrl-C stops following it, not the task
 * (dlqctl says so, and how to cancel it); dlqctl redrive --cancel with
 * --filter FILTER or --task N cancels one (cancelRedriveTask). Exit
 * status 0 when the task moved every letter, 1 when some failed, it was
 * cancelled, or it could not be started or followed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dlqctl.h"
#include "mosquitto_dlq.h"

/* How often the task is looked at: on a terminal, often enough for a bar
 * that moves; otherwise once a line. */
#define POLL_TTY_MS 250
#define POLL_PLAIN_MS 1000
#define BAR_WIDTH 30

/* The task with id in a getStatus reply's "redriveTasks", or NULL. */
static const cJSON *task_in(const cJSON *status, double id)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(status, "redriveTasks")){
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "id");
		if(cJSON_IsNumber(v) && v->valuedouble == id) return t;
	}
	return NULL;
}

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* One look at task t: a bar redrawn in place on a terminal, a line
 * otherwise. */
static void show(const cJSON *t, bool tty, double secs)
{
	double moved = num(t, "moved"), failed = num(t, "failed"), left = num(t, "left");
	double total = moved + failed + left;
	double rate = secs > 0 ? moved / secs : 0;
	if(tty){
		char bar[BAR_WIDTH + 1];
		int filled = total > 0 ? (int)((moved + failed) * BAR_WIDTH / total) : BAR_WIDTH;
		for(int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
		bar[BAR_WIDTH] = '\0';
		printf("\r[%s] %.0f/%.0f  moved %.0f  failed %.0f  left %.0f  %.0f/s ", bar, moved + failed, total, moved, failed,
				left, rate);
		fflush(stdout);
	}else{
		printf("redrive task %.0f: %s, %.0f moved, %.0f failed, %.0f left\n", num(t, "id"),
				control__str(t, "state") ? control__str(t, "state") : "?", moved, failed, left);
	}
}

/* Follows the task with id until it is no longer running (or Ctrl-C).
 * Returns an exit status. */
static int follow(struct control *ctl, const struct dlqctl_opts *o, double id)
{
	bool tty = !o->json && isatty(STDOUT_FILENO);
	uint64_t start = dlqctl_now_ms();
	int ret = DLQCTL_EXIT_FAIL;
	for(;;){
		cJSON *cmd = control__command(DLQ_COMMAND_GET_STATUS), *doc = NULL;
		const cJSON *data;
		if(cmd == NULL){
			fprintf(stderr, "dlqctl: out of memory\n");
			return DLQCTL_EXIT_FAIL;
		}
		int rc = dlqctl_stop ? DLQCTL_EXIT_FAIL : control__call(ctl, cmd, &doc, &data);
		cJSON_Delete(cmd);
		const cJSON *t = rc ? NULL : task_in(data, id);
		if(t == NULL){
			if(tty) printf("\n");
			if(dlqctl_stop){
				fprintf(stderr, "dlqctl: stopped following redrive task %.0f; it goes on in the broker "
						"(dlqctl redrive --cancel --task %.0f stops it)\n", id, id);
			}else if(rc == 0){
				fprintf(stderr, "dlqctl: getStatus no longer shows redrive task %.0f\n", id);
			}
			cJSON_Delete(doc);
			return DLQCTL_EXIT_FAIL;
		}
		const char *state = control__str(t, "state");
		bool running = state && !strcmp(state, "running");
		if(!o->json && (tty || running)) show(t, tty, (double)(dlqctl_now_ms() - start) / 1000.0);
		if(!running){
			double secs = (num(t, "ended") - num(t, "started")) / 1000.0;
			if(o->json){
				control__print_json(t);
			}else{
				if(tty) printf("\n");
				printf("redrive task %.0f %s: %.0f moved, %.0f failed, %.0f left, in %.1f s\n", id, state ? state : "?",
						num(t, "moved"), num(t, "failed"), num(t, "left"), secs);
			}
			ret = state && !strcmp(state, "done") && num(t, "failed") == 0 ? DLQCTL_EXIT_OK : DLQCTL_EXIT_FAIL;
			cJSON_Delete(doc);
			return ret;
		}
		cJSON_Delete(doc);
		/* Waits, keeping the connection served; Ctrl-C ends the wait. */
		uint64_t until = dlqctl_now_ms() + (tty ? POLL_TTY_MS : POLL_PLAIN_MS);
		while(!dlqctl_stop && dlqctl_now_ms() < until){
			if(conn__run(&ctl->c, 50) != MOSQ_ERR_SUCCESS) break;
		}
	}
}

static int cancel(struct control *ctl, const struct dlqctl_opts *o)
{
	cJSON *cmd = control__command(DLQ_COMMAND_CANCEL_REDRIVE_TASK), *doc = NULL;
	const cJSON *data;
	int ret = DLQCTL_EXIT_FAIL;
	if(cmd == NULL || (o->task_id ? !cJSON_AddNumberToObject(cmd, "task", (double)o->task_id)
			: !cJSON_AddStringToObject(cmd, "filter", o->policy_filter))){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(control__call(ctl, cmd, &doc, &data)) goto out;
	if(o->json){
		control__print_json(data);
	}else{
		printf("redrive task %.0f cancelled: %.0f moved, %.0f failed, %.0f left\n", num(data, "id"), num(data, "moved"),
				num(data, "failed"), num(data, "left"));
	}
	ret = DLQCTL_EXIT_OK;
out:
	cJSON_Delete(cmd);
	cJSON_Delete(doc);
	return ret;
}

int cmd__redrive_task(const struct dlqctl_opts *o)
{
	struct control ctl;
	cJSON *cmd = NULL, *doc = NULL;
	const cJSON *data;
	int ret = DLQCTL_EXIT_FAIL;

	if(control__open(&ctl, o)) goto out;
	if(o->cancel){
		ret = cancel(&ctl, o);
		goto out;
	}
	cmd = control__command(DLQ_COMMAND_START_REDRIVE_TASK);
	if(cmd == NULL || store__add_selection(cmd, o) || (o->to && !cJSON_AddStringToObject(cmd, "to", o->to))
			|| (o->rate > 0 && !cJSON_AddNumberToObject(cmd, "rate", o->rate))){
		fprintf(stderr, "dlqctl: out of memory\n");
		goto out;
	}
	if(control__call(&ctl, cmd, &doc, &data)) goto out;
	double id = num(data, "id");
	if(!o->json){
		printf("redrive task %.0f started: %.0f letters to %s at %.0f a second (bursts of %.0f)\n", id, num(data, "left"),
				control__str(data, "to") ? control__str(data, "to") : "their origin topics", num(data, "rate"),
				num(data, "burst"));
	}
	ret = follow(&ctl, o, id);
out:
	cJSON_Delete(cmd);
	cJSON_Delete(doc);
	control__close(&ctl);
	return ret;
}
