/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The plugin's entry points for Mosquitto's plugin API version 5: parse the
 * options into a validated configuration (refusing to start on any error),
 * create the instance, and register the callbacks. One table drives both
 * registering and unregistering, so the two cannot drift apart.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#include "adapters.h"
#include "brokerconf.h"
#include "config.h"
#include "mosquitto_dlq.h"
#include "port.h"

#define DLQ_EXPORT __attribute__((visibility("default")))

static const struct {
	int event;
	MOSQ_FUNC_generic_callback cb;
	const char *topic; /* control events only */
	bool redelivery;   /* only with plugin_opt_redelivery_tracking on */
} callbacks[] = {
	{ MOSQ_EVT_MESSAGE, adapter__message, NULL, false },
	{ MOSQ_EVT_CONTROL, adapter__control, DLQ_CONTROL_TOPIC, false },
	{ MOSQ_EVT_CONTROL, adapter__control, DLQ_NACK_TOPIC, false },
	{ MOSQ_EVT_TICK, adapter__tick, NULL, false },
	{ MOSQ_EVT_DISCONNECT, adapter__disconnect, NULL, false },
	{ MOSQ_EVT_RELOAD, adapter__reload, NULL, false },
	{ MOSQ_EVT_ACL_CHECK, adapter__acl_check, NULL, true },
};
#define CALLBACK_COUNT (sizeof(callbacks) / sizeof(callbacks[0]))

static bool wanted(const struct dlq_plugin *pl, size_t i)
{
	return !callbacks[i].redelivery || pl->engine.cfg.redelivery != DLQ_REDELIVERY_OFF;
}

static void unregister_first(struct dlq_plugin *pl, size_t count)
{
	for(size_t i = 0; i < count; i++){
		if(!wanted(pl, i)) continue;
		mosquitto_callback_unregister(pl->identifier, callbacks[i].event, callbacks[i].cb, callbacks[i].topic);
	}
}

/* The file this module was loaded from, or NULL. */
static const char *self_path(void)
{
	Dl_info info;
	if(dladdr((void *)mosquitto_plugin_version, &info) == 0) return NULL;
	return info.dli_fname;
}

/* The one startup line about access control. */
static void log_access_mode(enum dlq_redelivery_mode mode)
{
	switch(mode){
		case DLQ_REDELIVERY_OFF:
			port__log(DLQ_LOG_NOTICE, "redelivery tracking: off; access control unchanged (no access-check callback)");
			break;
		case DLQ_REDELIVERY_DEFER:
			port__log(DLQ_LOG_NOTICE, "redelivery tracking: defer; access checks are left to acl_file and the plugins "
					"loaded after this one, except that a message redelivered max_attempts times is removed "
					"from its session");
			break;
		case DLQ_REDELIVERY_ALLOW:
			port__log(DLQ_LOG_NOTICE, "redelivery tracking: allow; every access check is allowed (there is no other "
					"ACL source), except that a message redelivered max_attempts times is removed from its session");
			break;
	}
}

static void free_options(struct dlq_option *opts, size_t count)
{
	for(size_t i = 0; opts && i < count; i++){
		free((char *)opts[i].key);
		free((char *)opts[i].value);
	}
	free(opts);
}

/* A deep copy of the broker's options, kept for reloads. NULL when out of
 * memory (or when there are none: then count is 0). */
static struct dlq_option *copy_options(const struct mosquitto_opt *options, int count)
{
	if(count <= 0) return NULL;
	struct dlq_option *opts = calloc((size_t)count, sizeof(*opts));
	for(int i = 0; opts && i < count; i++){
		opts[i].key = strdup(options[i].key ? options[i].key : "");
		opts[i].value = strdup(options[i].value ? options[i].value : "");
		if(opts[i].key == NULL || opts[i].value == NULL){
			free_options(opts, (size_t)count);
			return NULL;
		}
	}
	return opts;
}

DLQ_EXPORT int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	for(int i = 0; i < supported_version_count; i++){
		if(supported_versions[i] == 5) return 5;
	}
	return -1;
}

DLQ_EXPORT int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata,
		struct mosquitto_opt *options, int option_count)
{
	char err[1024] = "";
	struct dlq_config cfg;
	struct dlq_option *opts = NULL;
	struct dlq_plugin *pl = NULL;

	size_t count = option_count > 0 ? (size_t)option_count : 0;
	opts = copy_options(options, option_count);
	if(opts == NULL && count) goto nomem;
	int rc = config__parse(opts, count, &cfg, err, sizeof(err));
	if(rc){
		free_options(opts, count);
		port__log(DLQ_LOG_ERR, "configuration refused: %s", err);
		return rc == ENOMEM ? MOSQ_ERR_NOMEM : MOSQ_ERR_INVAL;
	}
	struct broker_facts facts;
	brokerconf__read(&facts);
	if(facts.per_listener_settings){
		port__log(DLQ_LOG_ERR, "configuration refused: per_listener_settings true (in %s) is not supported: "
				"the broker then sends plugins no TICK events, so retry delays, NACK windows, state saving "
				"and retries of failed publishes could not work", facts.path);
		config__free(&cfg);
		free_options(opts, count);
		return MOSQ_ERR_INVAL;
	}
	char warn[1024];
	if(brokerconf__check_redelivery(cfg.redelivery, &facts, brokerconf__plugin_index(&facts, self_path()),
			err, sizeof(err), warn, sizeof(warn))){
		port__log(DLQ_LOG_ERR, "configuration refused: %s", err);
		config__free(&cfg);
		free_options(opts, count);
		return MOSQ_ERR_INVAL;
	}
	if(warn[0]) port__log(DLQ_LOG_WARNING, "%s", warn);
	cfg.broker_persistence = facts.persistence;
	cfg.per_listener_settings = facts.per_listener_settings;
	if(cfg.state_file && !facts.persistence){
		port__log(DLQ_LOG_WARNING, "plugin_opt_state_file is set but the broker runs without persistence%s%s: "
				"retry copies for one subscriber cannot outlive a restart and are dead-lettered then",
				facts.known ? " in " : "", facts.known ? facts.path : "");
	}

	pl = calloc(1, sizeof(*pl));
	if(pl == NULL){
		config__free(&cfg);
		free_options(opts, count);
		goto nomem;
	}
	pl->identifier = identifier;
	adapter__find_acl_check(pl);
	if(pl->acl_check == NULL){
		port__log(DLQ_LOG_WARNING, "this broker does not export mosquitto_acl_check: NACKs are not checked against "
				"read access, so a client that is given another's dlq-id can NACK it and receive its retry copy");
	}
	pl->options = opts;
	pl->option_count = count;
	size_t policy_count = cfg.policies.count;
	enum dlq_redelivery_mode mode = cfg.redelivery;
	uint64_t window = cfg.nack_window_ms;
	uint64_t bound = cfg.max_pending_bytes;
	rc = dlq__init(&pl->engine, &cfg, err, sizeof(err));
	if(rc){
		port__log(DLQ_LOG_ERR, "could not start: %s", err);
		dlq__cleanup(&pl->engine);
		free_options(pl->options, pl->option_count);
		free(pl);
		return rc == ENOMEM ? MOSQ_ERR_NOMEM : MOSQ_ERR_UNKNOWN;
	}

	for(size_t i = 0; i < CALLBACK_COUNT; i++){
		if(!wanted(pl, i)) continue;
		rc = mosquitto_callback_register(identifier, callbacks[i].event, callbacks[i].cb, callbacks[i].topic, pl);
		if(rc != MOSQ_ERR_SUCCESS){
			port__log(DLQ_LOG_ERR, "could not register callback %zu (event %d%s%s): %s", i, callbacks[i].event,
					callbacks[i].topic ? ", " : "", callbacks[i].topic ? callbacks[i].topic : "",
					mosquitto_strerror(rc));
			unregister_first(pl, i);
			dlq__cleanup(&pl->engine);
			free_options(pl->options, pl->option_count);
			free(pl);
			return rc;
		}
	}
	*userdata = pl;
	port__log(DLQ_LOG_NOTICE, "mosquitto-dlq %s loaded: %zu policies, nack_window %" PRIu64 " ms, "
			"max_pending_bytes %" PRIu64, DLQ_VERSION, policy_count, window, bound);
	log_access_mode(mode);
	return MOSQ_ERR_SUCCESS;

nomem:
	port__log(DLQ_LOG_ERR, "out of memory while loading");
	return MOSQ_ERR_NOMEM;
}

DLQ_EXPORT int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options, int option_count)
{
	struct dlq_plugin *pl = userdata;
	(void)options;
	(void)option_count;

	if(pl == NULL) return MOSQ_ERR_SUCCESS;
	unregister_first(pl, CALLBACK_COUNT);
	dlq__cleanup(&pl->engine);
	free_options(pl->options, pl->option_count);
	free(pl);
	return MOSQ_ERR_SUCCESS;
}
