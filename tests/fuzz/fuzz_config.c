/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: config__parse over an option list, as the broker hands the
 * plugin its plugin_opt_* lines. Each input line is one option, "<key>
 * <value>" (the key without plugin_opt_, split at the first space). The value
 * of policy_file is not a path but the file's content: the target writes it to
 * a private file and passes that file's path, so the fuzzer never makes the
 * parser open a device or a FIFO. An accepted configuration must hold its
 * documented bounds and match topics as a plain walk would; a refused one must
 * leave nothing to free and say why.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "mosquitto_dlq.h"
#include "util/topic.h"

#define MAX_OPTIONS 32

static char policy_path[64];

static void remove_policy_file(void)
{
	unlink(policy_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(policy_path, sizeof(policy_path), "/tmp/dlq-fuzz-config-%ld.json", (long)getpid());
	atexit(remove_policy_file);
	return 0;
}

static void write_policy_file(const char *text)
{
	FILE *fp = fopen(policy_path, "wb");
	FUZZ_CHECK(fp != NULL, "cannot write %s", policy_path);
	fputs(text, fp);
	fclose(fp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dlq_option opts[MAX_OPTIONS];
	struct dlq_config cfg;
	char err[1024];
	size_t count = 0;

	if(policy_path[0] == '\0') LLVMFuzzerInitialize(NULL, NULL);
	/* One NUL-terminated copy; lines and keys are cut in place. */
	char *text = malloc(size + 1);
	if(text == NULL) return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for(char *line = text; line && count < MAX_OPTIONS; ){
		char *nl = strchr(line, '\n');
		if(nl) *nl = '\0';
		char *sp = strchr(line, ' ');
		if(sp) *sp = '\0';
		opts[count].key = line;
		opts[count].value = sp ? sp + 1 : "";
		if(!strcmp(line, "policy_file")){
			write_policy_file(opts[count].value);
			opts[count].value = policy_path;
		}
		count++;
		line = nl ? nl + 1 : NULL;
	}

	err[0] = '\0';
	int rc = config__parse(opts, count, &cfg, err, sizeof(err));
	if(rc){
		FUZZ_CHECK(rc == EINVAL, "rc %d", rc);
		FUZZ_CHECK(err[0] != '\0', "refused without a message");
		FUZZ_CHECK(cfg.policies.count == 0 && cfg.policies.items == NULL && cfg.state_file == NULL
				&& cfg.policy_file == NULL, "refused, but *out holds something");
	}else{
		FUZZ_CHECK(cfg.nack_window_ms >= 100 && cfg.nack_window_ms <= 7ull * 24 * 3600 * 1000, "nack_window");
		FUZZ_CHECK(cfg.max_pending_bytes >= 1024, "max_pending_bytes");
		FUZZ_CHECK(cfg.sys_interval_ms == 0 || cfg.sys_interval_ms >= 1000, "sys_interval");
		FUZZ_CHECK(!cfg.state_save_on_change || cfg.state_file, "state_save_on_change");
		fuzz_check_matching(&cfg.policies);
		config__free(&cfg);
	}
	free(text);
	return 0;
}
