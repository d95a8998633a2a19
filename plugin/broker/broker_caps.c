/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Finding out what the running broker offers (see broker_caps.h): dlsym for
 * the functions upstream's linker.syms does not promise, checked with dladdr
 * to belong to the broker executable itself (a plugin loaded before this one
 * may have brought libmosquitto into the global scope); a registration probe
 * for the 2.1 events; and, where the broker lacks the property read
 * functions (2.0.21), the client library libmosquitto.so.1 of the 2.0 line,
 * whose property structs are the broker's (lib/property_mosq.h is the same
 * in 2.0.11 and 2.0.21: docs/design.md, "Broker versions").
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>

#include "broker/broker_caps.h"
#include "broker/broker_v21.h"

#define LIBMOSQUITTO_SONAME "libmosquitto.so.1"

/* The property read functions, in the order of struct dlq_prop_reader. */
static const char *const read_names[] = {
	"mosquitto_property_identifier",
	"mosquitto_property_next",
	"mosquitto_property_read_byte",
	"mosquitto_property_read_string",
	"mosquitto_property_read_binary",
	"mosquitto_property_read_string_pair",
};
#define READ_COUNT (sizeof(read_names) / sizeof(read_names[0]))

static void free_broker_copy(void *p)
{
	mosquitto_free(p);
}

static void free_libc_copy(void *p)
{
	free(p);
}

/* The object file a symbol lives in, or NULL. */
static void *object_of(void *sym)
{
	Dl_info info;
	if(sym == NULL || dladdr(sym, &info) == 0) return NULL;
	return info.dli_fbase;
}

/* A function of the broker executable, or NULL (absent, or found in some
 * other object of the global scope). */
static void *broker_symbol(void *broker, const char *name)
{
	void *sym = dlsym(RTLD_DEFAULT, name);
	return sym && object_of(sym) == broker ? sym : NULL;
}

static void set_reader(struct dlq_prop_reader *r, void *const fns[READ_COUNT], void (*free_copy)(void *))
{
	*(void **)&r->identifier = fns[0];
	*(void **)&r->next = fns[1];
	*(void **)&r->read_byte = fns[2];
	*(void **)&r->read_string = fns[3];
	*(void **)&r->read_binary = fns[4];
	*(void **)&r->read_string_pair = fns[5];
	r->free_copy = free_copy;
}

static bool reader_from_broker(struct broker_caps *c, void *broker)
{
	void *fns[READ_COUNT];
	for(size_t i = 0; i < READ_COUNT; i++){
		fns[i] = broker_symbol(broker, read_names[i]);
		if(fns[i] == NULL) return false;
	}
	set_reader(&c->props, fns, free_broker_copy);
	c->prop_source = BROKER_PROPS_BROKER;
	return true;
}

/* libmosquitto.so.1, if it is of the 2.0 line: 2.1's client library has
 * its own property structs (libcommon), not necessarily a 2.0 broker's. */
static int reader_from_libmosquitto(struct broker_caps *c, char *err, size_t errlen)
{
	void *h = dlopen(LIBMOSQUITTO_SONAME, RTLD_NOW | RTLD_LOCAL);
	if(h == NULL){
		snprintf(err, errlen, "%s could not be opened (%s)", LIBMOSQUITTO_SONAME, dlerror());
		return ENOENT;
	}
	int (*lib_version)(int *, int *, int *);
	*(void **)&lib_version = dlsym(h, "mosquitto_lib_version");
	int major = 0, minor = 0, revision = 0;
	if(lib_version) lib_version(&major, &minor, &revision);
	if(major != 2 || minor != 0){
		snprintf(err, errlen, "%s is version %d.%d.%d, not 2.0.x", LIBMOSQUITTO_SONAME, major, minor, revision);
		dlclose(h);
		return ENOENT;
	}
	void *fns[READ_COUNT];
	for(size_t i = 0; i < READ_COUNT; i++){
		fns[i] = dlsym(h, read_names[i]);
		if(fns[i] == NULL){
			snprintf(err, errlen, "%s %d.%d.%d lacks %s", LIBMOSQUITTO_SONAME, major, minor, revision, read_names[i]);
			dlclose(h);
			return ENOENT;
		}
	}
	/* libmosquitto allocates its copies with libc's calloc (it has no
	 * memory tracking of its own), so they go back to libc's free. */
	set_reader(&c->props, fns, free_libc_copy);
	c->prop_source = BROKER_PROPS_LIBMOSQUITTO;
	c->libmosquitto = h;
	snprintf(c->libmosquitto_version, sizeof(c->libmosquitto_version), "%d.%d.%d", major, minor, revision);
	return 0;
}

static int probe_callback(int event, void *event_data, void *userdata)
{
	(void)event;
	(void)event_data;
	(void)userdata;
	return MOSQ_ERR_SUCCESS;
}

/* Whether the broker accepts a callback for event: 2.0's
 * mosquitto_callback_register refuses events it does not know. */
static bool event_registers(mosquitto_plugin_id_t *identifier, int event)
{
	if(mosquitto_callback_register(identifier, event, probe_callback, NULL, NULL) != MOSQ_ERR_SUCCESS) return false;
	mosquitto_callback_unregister(identifier, event, probe_callback, NULL);
	return true;
}

static const char *const v21_names[] = {
	"mosquitto_property_identifier",
	"mosquitto_property_next",
	"mosquitto_property_string_name",
	"mosquitto_property_string_name_length",
	"mosquitto_property_string_value",
	"mosquitto_property_string_value_length",
	"mosquitto_property_copy_all",
	"mosquitto_property_get_length_all",
};
#define V21_COUNT (sizeof(v21_names) / sizeof(v21_names[0]))

/* 2.1's accessors, all or none (they are in the broker executable). */
static void props_v21(struct broker_caps *c, void *broker)
{
	void *fns[V21_COUNT];
	for(size_t i = 0; i < V21_COUNT; i++){
		fns[i] = broker_symbol(broker, v21_names[i]);
		if(fns[i] == NULL) return;
	}
	struct broker_props_v21 *v = &c->v21;
	*(void **)&v->identifier = fns[0];
	*(void **)&v->next = fns[1];
	*(void **)&v->string_name = fns[2];
	*(void **)&v->string_name_length = fns[3];
	*(void **)&v->string_value = fns[4];
	*(void **)&v->string_value_length = fns[5];
	*(void **)&v->copy_all = fns[6];
	*(void **)&v->get_length_all = fns[7];
}

int broker_caps__probe(struct broker_caps *c, mosquitto_plugin_id_t *identifier, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	void *broker = object_of(dlsym(RTLD_DEFAULT, "mosquitto_broker_publish"));

	c->acl_check = broker_symbol(broker, "mosquitto_acl_check");
	*(void **)&c->set_info = broker_symbol(broker, "mosquitto_plugin_set_info");
	*(void **)&c->client_by_id = broker_symbol(broker, "mosquitto_client");
	c->evt_connect = event_registers(identifier, DLQ_MOSQ_EVT_CONNECT);
	c->evt_message_out = event_registers(identifier, DLQ_MOSQ_EVT_MESSAGE_OUT);
	c->evt_client_offline = event_registers(identifier, DLQ_MOSQ_EVT_CLIENT_OFFLINE);
	c->evt_subscribe = event_registers(identifier, DLQ_MOSQ_EVT_SUBSCRIBE);
	c->line = c->set_info || c->evt_message_out ? BROKER_LINE_21 : BROKER_LINE_20;
	if(c->line == BROKER_LINE_21) props_v21(c, broker);

	if(reader_from_broker(c, broker)) return 0;
	char why[512];
	if(reader_from_libmosquitto(c, why, sizeof(why)) == 0) return 0;
	snprintf(err, errlen, "this broker does not export the mosquitto_property_read_* functions, and %s: "
			"install libmosquitto1 (Mosquitto's client library, 2.0.x)", why);
	return ENOENT;
}

void broker_caps__describe(const struct broker_caps *c, char *buf, size_t size)
{
	char why[128] = "";
	if(c->line == BROKER_LINE_21){
		snprintf(why, sizeof(why), "%s%s%s", c->set_info ? "mosquitto_plugin_set_info" : "",
				c->set_info && c->evt_message_out ? ", " : "", c->evt_message_out ? "MESSAGE_OUT" : "");
	}else{
		snprintf(why, sizeof(why), "no mosquitto_plugin_set_info, no MESSAGE_OUT event");
	}
	char source[96];
	if(c->prop_source == BROKER_PROPS_LIBMOSQUITTO){
		snprintf(source, sizeof(source), "libmosquitto %s", c->libmosquitto_version);
	}else{
		snprintf(source, sizeof(source), "the broker");
	}
	bool any = c->evt_connect || c->evt_message_out || c->evt_client_offline || c->evt_subscribe;
	snprintf(buf, size, "broker: Mosquitto %s line (%s); property reading: %s; mosquitto_acl_check: %s; "
			"2.1 events: %s%s%s%s%s",
			c->line == BROKER_LINE_21 ? "2.1" : "2.0", why, source, c->acl_check ? "yes" : "no",
			any ? "" : "none",
			c->evt_connect ? "CONNECT " : "", c->evt_message_out ? "MESSAGE_OUT " : "",
			c->evt_subscribe ? "SUBSCRIBE " : "", c->evt_client_offline ? "CLIENT_OFFLINE" : "");
	size_t n = strlen(buf);
	if(n && buf[n - 1] == ' ') buf[n - 1] = '\0';
}

int broker_caps__acl_check(const struct broker_caps *c, struct mosquitto *client, const char *topic,
		uint32_t payloadlen, void *payload, uint8_t qos, bool retain, int access)
{
	if(c->line == BROKER_LINE_21){
		broker_acl_check_v21_fn f;
		*(void **)&f = c->acl_check;
		return f(client, topic, payloadlen, payload, qos, retain, NULL, access);
	}
	broker_acl_check_v20_fn f;
	*(void **)&f = c->acl_check;
	return f(client, topic, payloadlen, payload, qos, retain, access);
}

void broker_caps__cleanup(struct broker_caps *c)
{
	if(c->libmosquitto) dlclose(c->libmosquitto);
	c->libmosquitto = NULL;
}
