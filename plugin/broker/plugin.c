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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#include "broker/adapters.h"
#include "broker/broker_v21.h"
#include "broker/brokerconf.h"
#include "config/config.h"
#include "mosquitto_dlq.h"
#include "util/port.h"

#define DLQ_EXPORT __attribute__((visibility("default")))

/* When a callback is registered, beyond having one for the broker's line. */
enum callback_need {
	NEED_ALWAYS,
	NEED_REDELIVERY,     /* plugin_opt_redelivery_tracking defer or allow */
	NEED_MESSAGE_OUT,    /* 2.1 with MESSAGE_OUT and its property accessors (exact counting) */
	NEED_NO_PERSISTENCE, /* 2.1 refuses persistence events with `persistence true` */
};

static const struct {
	int event;
	MOSQ_FUNC_generic_callback cb;     /* NULL: none on 2.0 */
	MOSQ_FUNC_generic_callback cb_v21; /* on a 2.1 broker, if not NULL */
	const char *topic; /* control events only */
	enum callback_need need;
} callbacks[] = {
	{ MOSQ_EVT_MESSAGE, adapter__message, NULL, NULL, NEED_ALWAYS },
	{ MOSQ_EVT_CONTROL, adapter__control, NULL, DLQ_CONTROL_TOPIC, NEED_ALWAYS },
	{ MOSQ_EVT_CONTROL, adapter__control, NULL, DLQ_NACK_TOPIC, NEED_ALWAYS },
	{ MOSQ_EVT_CONTROL, adapter__control, NULL, DLQ_ACK_TOPIC, NEED_ALWAYS },
	{ MOSQ_EVT_CONTROL, adapter__control, NULL, DLQ_PROGRESS_TOPIC, NEED_ALWAYS },
	{ MOSQ_EVT_TICK, adapter__tick, NULL, NULL, NEED_ALWAYS },
	{ MOSQ_EVT_DISCONNECT, adapter__disconnect, NULL, NULL, NEED_ALWAYS },
	{ DLQ_MOSQ_EVT_CLIENT_OFFLINE, NULL, adapter__client_offline_v21, NULL, NEED_ALWAYS },
	{ DLQ_MOSQ_EVT_SUBSCRIBE, NULL, adapter__subscribe_v21, NULL, NEED_ALWAYS },
	{ DLQ_MOSQ_EVT_CONNECT, NULL, adapter__connect_v21, NULL, NEED_ALWAYS },
	{ DLQ_MOSQ_EVT_UNSUBSCRIBE, NULL, adapter__unsubscribe_v21, NULL, NEED_ALWAYS },
	{ DLQ_MOSQ_EVT_MESSAGE_OUT, NULL, adapter__message_out_v21, NULL, NEED_MESSAGE_OUT },
	{ DLQ_MOSQ_EVT_PERSIST_CLIENT_ADD, NULL, adapter__persist_client_v21, NULL, NEED_NO_PERSISTENCE },
	{ DLQ_MOSQ_EVT_PERSIST_CLIENT_UPDATE, NULL, adapter__persist_client_v21, NULL, NEED_NO_PERSISTENCE },
	{ DLQ_MOSQ_EVT_PERSIST_CLIENT_DELETE, NULL, adapter__persist_client_v21, NULL, NEED_NO_PERSISTENCE },
	{ MOSQ_EVT_RELOAD, adapter__reload, NULL, NULL, NEED_ALWAYS },
	{ MOSQ_EVT_ACL_CHECK, adapter__acl_check_v20, adapter__acl_check_v21, NULL, NEED_REDELIVERY },
};
#define CALLBACK_COUNT (sizeof(callbacks) / sizeof(callbacks[0]))

/* The callback of entry i for the running broker, or NULL. */
static MOSQ_FUNC_generic_callback callback_for(const struct dlq_plugin *pl, size_t i)
{
	if(pl->caps.line == BROKER_LINE_21 && callbacks[i].cb_v21) return callbacks[i].cb_v21;
	return callbacks[i].cb;
}

static bool wanted(const struct dlq_plugin *pl, size_t i)
{
	if(callback_for(pl, i) == NULL) return false;
	switch(callbacks[i].need){
		case NEED_ALWAYS: return true;
		case NEED_REDELIVERY: return dlq__config(pl->engine)->redelivery != DLQ_REDELIVERY_OFF;
		case NEED_MESSAGE_OUT: return dlq__broker(pl->engine)->exact_counting;
		case NEED_NO_PERSISTENCE: return dlq__broker(pl->engine)->exact_counting && !dlq__broker(pl->engine)->persistence;
	}
	return false;
}

/* Exact counting needs MESSAGE_OUT, CONNECT (which ends a reconnect's
 * access checks) and 2.1's property accessors (the stamp is found on every
 * send without copying). */
static bool can_count_sends(const struct broker_caps *c)
{
	return c->line == BROKER_LINE_21 && c->evt_message_out && c->evt_connect && c->v21.get_length_all != NULL;
}

static void unregister_first(struct dlq_plugin *pl, size_t count)
{
	for(size_t i = 0; i < count; i++){
		if(!wanted(pl, i)) continue;
		mosquitto_callback_unregister(pl->identifier, callbacks[i].event, callback_for(pl, i), callbacks[i].topic);
	}
}

/* The plugin's own text for the broker's few registration errors
 * (mosquitto_strerror is not among the functions 2.0.21 exports). */
static const char *register_error(int rc)
{
	switch(rc){
		case MOSQ_ERR_NOMEM: return "out of memory";
		case MOSQ_ERR_INVAL: return "invalid arguments";
		case MOSQ_ERR_NOT_SUPPORTED: return "event not supported by this broker";
		case MOSQ_ERR_ALREADY_EXISTS: return "already registered";
		default: return "broker error";
	}
}

/* The file this module was loaded from, or NULL. */
static const char *self_path(void)
{
	Dl_info info;
	if(dladdr((void *)mosquitto_plugin_version, &info) == 0) return NULL;
	return info.dli_fname;
}

/* The startup line about how deliveries are counted and stamped. */
static void log_counting(const struct dlq_plugin *pl)
{
	const struct dlq_config *cfg = dlq__config(pl->engine);
	if(!dlq__broker(pl->engine)->exact_counting){
		if(cfg->delivery_count != DLQ_DELIVERY_COUNT_OFF && cfg->delivery_count_given){
			port__log(DLQ_LOG_NOTICE, "plugin_opt_delivery_count %s: this broker (Mosquitto 2.0) does not show "
					"a plugin each send to each subscriber, so no delivery-count is stamped",
					config__delivery_count_name(cfg->delivery_count));
		}
		return;
	}
	port__log(DLQ_LOG_NOTICE, "delivery counting: exact (MESSAGE_OUT): every PUBLISH of a tracked message written "
			"to a subscriber is one attempt for it, resends included%s; delivery-count %s; Maximum Packet Size %s",
			cfg->redelivery == DLQ_REDELIVERY_OFF ? " (redelivery tracking off: counted, never removed from a session)" : "",
			cfg->delivery_count == DLQ_DELIVERY_COUNT_ON ? "on (from a subscriber's second delivery; absent means 1)"
					: config__delivery_count_name(cfg->delivery_count),
			dlq__broker(pl->engine)->persistence ? "not known (the broker runs with persistence true, which refuses the "
					"persistence events that show it)" : "known for sessions the broker persists");
}

/* The one startup line about access control. */
static void log_access_mode(enum dlq_redelivery_mode mode, enum broker_line line)
{
	if(line == BROKER_LINE_21 && mode != DLQ_REDELIVERY_OFF){
		port__log(DLQ_LOG_NOTICE, "redelivery tracking: on (%s means the same on Mosquitto 2.1); access "
				"checks are observed and left to the other ACL sources (MOSQ_ERR_PLUGIN_IGNORE), except that "
				"a message sent max_attempts times to a subscriber is removed from its session when it reconnects",
				mode == DLQ_REDELIVERY_ALLOW ? "allow" : "defer");
		return;
	}
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

/* The options, copied (kept for reloads) and parsed into *cfg, and the
 * instance's struct, in *out. Returns MOSQ_ERR_SUCCESS, or a MOSQ_ERR_*
 * with the reason logged and nothing left to free. */
static int load_options(mosquitto_plugin_id_t *identifier, struct mosquitto_opt *options, int option_count,
		struct dlq_plugin **out, struct dlq_config *cfg)
{
	char err[1024] = "";
	size_t count = option_count > 0 ? (size_t)option_count : 0;
	struct dlq_option *opts = copy_options(options, option_count);
	if(opts == NULL && count) goto nomem;
	int rc = config__parse(opts, count, cfg, err, sizeof(err));
	if(rc == 0){
		/* The broker's name, by default the host name, read once here: a
		 * reload keeps the name the broker started with. */
		char host[256];
		bool have_host = gethostname(host, sizeof(host)) == 0;
		host[sizeof(host) - 1] = '\0';
		rc = config__name_broker(cfg, have_host ? host : NULL, err, sizeof(err));
		if(rc) config__free(cfg);
	}
	if(rc){
		free_options(opts, count);
		port__log(DLQ_LOG_ERR, "configuration refused: %s", err);
		return rc == ENOMEM ? MOSQ_ERR_NOMEM : MOSQ_ERR_INVAL;
	}
#ifdef DLQ_TEST_HOOKS
	/* Tests (the test build of the module only): DLQ_TEST_SAVE_PAUSE_MS=N
	 * makes each background save wait N ms before it writes, so that a
	 * test can stop the broker while one runs. */
	const char *pause = getenv("DLQ_TEST_SAVE_PAUSE_MS");
	if(pause) cfg->state_save_pause_ms = strtoull(pause, NULL, 10);
#endif
	struct dlq_plugin *pl = calloc(1, sizeof(*pl));
	if(pl == NULL || (pl->engine = dlq__new()) == NULL){
		free(pl);
		config__free(cfg);
		free_options(opts, count);
		goto nomem;
	}
	pl->identifier = identifier;
	pl->options = opts;
	pl->option_count = count;
	*out = pl;
	return MOSQ_ERR_SUCCESS;

nomem:
	port__log(DLQ_LOG_ERR, "out of memory while loading");
	return MOSQ_ERR_NOMEM;
}

/* What the running broker offers (broker_caps.h), found once and logged.
 * Returns 0 or an errno, with the reason logged. */
static int probe_broker(struct dlq_plugin *pl)
{
	char err[1024] = "";
	int rc;

	rc = broker_caps__probe(&pl->caps, pl->identifier, err, sizeof(err));
	if(rc){
		/* Without the read functions, every copy and dead letter would
		 * lose its publisher's properties (correlation data, response
		 * topic, user properties) and a NACK its reason and delay: not
		 * the plugin's contract, so it does not start
		 * (docs/supported-brokers.md). */
		port__log(DLQ_LOG_ERR, "could not start: %s", err);
		return rc;
	}
	char caps_line[512];
	broker_caps__describe(&pl->caps, caps_line, sizeof(caps_line));
	port__log(DLQ_LOG_NOTICE, "%s", caps_line);
	if(pl->caps.set_info){
		pl->caps.set_info(pl->identifier, "mosquitto-dlq", DLQ_VERSION);
	}
	return 0;
}

/* The broker's own configuration (brokerconf.h) against the plugin's:
 * refused where they cannot work together; the facts the engine needs put
 * in *b (b->db_path the caller's to free); warnings logged. Returns 0 or an
 * errno, logged. */
static int check_broker_config(struct dlq_plugin *pl, const struct dlq_config *cfg, struct dlq_broker *b)
{
	char err[1024] = "";

	struct broker_facts facts;
	brokerconf__read(&facts);
	/* 2.1 sends TICK with per_listener_settings too; 2.0 does not. */
	bool no_tick = facts.per_listener_settings && pl->caps.line == BROKER_LINE_20;
	if(no_tick){
		port__log(DLQ_LOG_ERR, "configuration refused: per_listener_settings true (in %s) is not supported on "
				"Mosquitto 2.0: the broker then sends plugins no TICK events, so retry delays, NACK windows, "
				"state saving and retries of failed publishes could not work", facts.path);
		return EINVAL;
	}
	char warn[1024];
	int self = brokerconf__plugin_index(&facts, self_path());
	if(pl->caps.line == BROKER_LINE_21){
		if(cfg->redelivery != DLQ_REDELIVERY_OFF) brokerconf__check_redelivery_v21(&facts, self, warn, sizeof(warn));
		else warn[0] = '\0';
	}else if(brokerconf__check_redelivery(cfg->redelivery, &facts, self, err, sizeof(err), warn, sizeof(warn))){
		port__log(DLQ_LOG_ERR, "configuration refused: %s", err);
		return EINVAL;
	}
	if(warn[0]) port__log(DLQ_LOG_WARNING, "%s", warn);
	if(pl->caps.line == BROKER_LINE_21 && cfg->v5_sessions_persist){
		port__log(DLQ_LOG_NOTICE, "plugin_opt_v5_sessions_persist is not needed on Mosquitto 2.1 and is not used: "
				"the broker says at the end of each connection whether its session lasts");
	}
	b->persistence = facts.persistence;
	b->queue_qos0_messages = facts.queue_qos0_messages;
	if(pl->caps.client_by_id){
		b->has_session = adapter__broker_has_session;
		b->ctx = &pl->caps;
	}
	b->per_listener_settings = no_tick;
	if(cfg->state_file && cfg->state_save_on_change && facts.persistence){
		char db[8192];
		if(facts.autosave_interval == 0){
			port__log(DLQ_LOG_WARNING, "plugin_opt_state_save_on_change is set but the broker's autosave_interval is 0 "
					"(in %s): it saves its database only at shutdown, so a SIGKILL loses every retry copy and dead "
					"letter it had taken and not yet delivered", facts.path);
		}else if(brokerconf__db_path(&facts, db, sizeof(db))){
			b->db_path = strdup(db);
			if(b->db_path == NULL){
				port__log(DLQ_LOG_ERR, "could not start: out of memory");
				return ENOMEM;
			}
			port__log(DLQ_LOG_NOTICE, "retry copies and dead letters the broker takes are kept in the state file "
					"until the broker saves its database %s (autosave_interval %ld)", db, facts.autosave_interval);
		}
	}
	if(cfg->state_file && !facts.persistence){
		port__log(DLQ_LOG_WARNING, "plugin_opt_state_file is set but the broker runs without persistence%s%s: "
				"retry copies for one subscriber cannot outlive a restart and are dead-lettered then",
				facts.known ? " in " : "", facts.known ? facts.path : "");
	}
	if(pl->caps.acl_check == NULL){
		port__log(DLQ_LOG_WARNING, "this broker does not export mosquitto_acl_check: NACKs are not checked against "
				"read access, so a client that is given another's dlq-id can NACK it and receive its retry copy");
	}
	b->exact_counting = can_count_sends(&pl->caps);
	if(config__check_deadlines(cfg, b->exact_counting, err, sizeof(err))){
		port__log(DLQ_LOG_ERR, "configuration refused: %s", err);
		return EINVAL;
	}
	return 0;
}

/* The callbacks the instance wants, from the one table. Returns
 * MOSQ_ERR_SUCCESS, or the broker's error with none left registered. */
static int register_callbacks(struct dlq_plugin *pl)
{
	for(size_t i = 0; i < CALLBACK_COUNT; i++){
		if(!wanted(pl, i)) continue;
		int rc = mosquitto_callback_register(pl->identifier, callbacks[i].event, callback_for(pl, i),
				callbacks[i].topic, pl);
		if(rc != MOSQ_ERR_SUCCESS){
			port__log(DLQ_LOG_ERR, "could not register callback %zu (event %d%s%s): %s", i, callbacks[i].event,
					callbacks[i].topic ? ", " : "", callbacks[i].topic ? callbacks[i].topic : "",
					register_error(rc));
			unregister_first(pl, i);
			return rc;
		}
	}
	return MOSQ_ERR_SUCCESS;
}

/* Frees the instance, its engine cleaned up (dlq__cleanup) where it
 * started. */
static void plugin_free(struct dlq_plugin *pl)
{
	dlq__free(pl->engine);
	systopics__cleanup(&pl->sys);
	packet_size__limits_cleanup(&pl->limits);
	broker_caps__cleanup(&pl->caps);
	free_options(pl->options, pl->option_count);
	free(pl);
}

static int mosq_error(int rc)
{
	return rc == ENOMEM ? MOSQ_ERR_NOMEM : rc == EINVAL ? MOSQ_ERR_INVAL : MOSQ_ERR_UNKNOWN;
}

/* Parse the options, probe the broker, check its configuration, start the
 * engine, register. */
DLQ_EXPORT int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata,
		struct mosquitto_opt *options, int option_count)
{
	char err[1024] = "";
	struct dlq_config cfg;
	struct dlq_plugin *pl = NULL;
	struct dlq_broker broker = {0};

	int rc = load_options(identifier, options, option_count, &pl, &cfg);
	if(rc != MOSQ_ERR_SUCCESS) return rc;
	rc = probe_broker(pl);
	if(rc == 0) rc = check_broker_config(pl, &cfg, &broker);
	if(rc == 0 && (rc = dlq__init(pl->engine, &cfg, &broker, err, sizeof(err))) != 0){
		port__log(DLQ_LOG_ERR, "could not start: %s", err);
		dlq__cleanup(pl->engine);
	}
	/* dlq__init took both, if it ran: then empty. */
	config__free(&cfg);
	free(broker.db_path);
	if(rc){
		plugin_free(pl);
		return mosq_error(rc);
	}
	rc = register_callbacks(pl);
	if(rc != MOSQ_ERR_SUCCESS){
		dlq__cleanup(pl->engine);
		plugin_free(pl);
		return rc;
	}
	*userdata = pl;
	const struct dlq_config *c = dlq__config(pl->engine);
	pl->collecting = c->collect.count > 0 || c->redrive.from_topic != NULL;
	port__log(DLQ_LOG_NOTICE, "mosquitto-dlq %s loaded: %zu policies, nack_window %" PRIu64 " ms, "
			"max_pending_bytes %" PRIu64 ", broker name \"%s\"", DLQ_VERSION, c->policies.count, c->nack_window_ms,
			c->max_pending_bytes, c->broker_name);
	if(c->policies.count == 0) adapter__log_no_policies();
	for(size_t i = 0; i < c->collect.count; i++){
		port__log(DLQ_LOG_NOTICE, "collecting other brokers' dead letters on \"%s\" (plugin_opt_collect)",
				c->collect.items[i]);
	}
	if(c->redrive.home){
		port__log(DLQ_LOG_NOTICE, "other brokers' letters redriven here are sent home on \"%s\" "
				"(plugin_opt_redrive_home)", c->redrive.home);
	}
	if(c->redrive.from_topic){
		port__log(DLQ_LOG_NOTICE, "taking redrive requests on \"%s\" from \"%s\" (plugin_opt_redrive_from)",
				c->redrive.from_topic, c->redrive.from_client);
	}
	log_access_mode(c->redelivery, pl->caps.line);
	log_counting(pl);
	return MOSQ_ERR_SUCCESS;
}

DLQ_EXPORT int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options, int option_count)
{
	struct dlq_plugin *pl = userdata;
	(void)options;
	(void)option_count;

	if(pl == NULL) return MOSQ_ERR_SUCCESS;
	unregister_first(pl, CALLBACK_COUNT);
	dlq__cleanup(pl->engine);
	plugin_free(pl);
	return MOSQ_ERR_SUCCESS;
}
