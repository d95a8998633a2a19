/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The unit tests' property readers (see fake_reader.h). Both read lists
 * built with libmosquitto, which the unit tests link.
 */
#include <stdlib.h>

#include <mosquitto.h>

#include "fake_reader.h"

static int identifier(const mosquitto_property *p)
{
	return mosquitto_property_identifier(p);
}

static const mosquitto_property *next(const mosquitto_property *p)
{
	return mosquitto_property_next(p);
}

static const mosquitto_property *read_byte(const mosquitto_property *p, int id, uint8_t *v, bool skip)
{
	return mosquitto_property_read_byte(p, id, v, skip);
}

static const mosquitto_property *read_string(const mosquitto_property *p, int id, char **v, bool skip)
{
	return mosquitto_property_read_string(p, id, v, skip);
}

static const mosquitto_property *read_binary(const mosquitto_property *p, int id, void **v, uint16_t *len, bool skip)
{
	return mosquitto_property_read_binary(p, id, v, len, skip);
}

static const mosquitto_property *read_pair(const mosquitto_property *p, int id, char **n, char **v, bool skip)
{
	return mosquitto_property_read_string_pair(p, id, n, v, skip);
}

/* 2.1.2 hands over NULL where 2.0 allocated an empty string. */
static void empty_to_null(char **s)
{
	if(s && *s && (*s)[0] == '\0'){
		free(*s);
		*s = NULL;
	}
}

static const mosquitto_property *read_string_v21(const mosquitto_property *p, int id, char **v, bool skip)
{
	const mosquitto_property *r = read_string(p, id, v, skip);
	if(r) empty_to_null(v);
	return r;
}

static const mosquitto_property *read_binary_v21(const mosquitto_property *p, int id, void **v, uint16_t *len,
		bool skip)
{
	const mosquitto_property *r = read_binary(p, id, v, len, skip);
	if(r && *len == 0){
		free(*v);
		*v = NULL;
	}
	return r;
}

static const mosquitto_property *read_pair_v21(const mosquitto_property *p, int id, char **n, char **v, bool skip)
{
	const mosquitto_property *r = read_pair(p, id, n, v, skip);
	if(r){
		empty_to_null(n);
		empty_to_null(v);
	}
	return r;
}

const struct dlq_prop_reader fake_reader_v20 = {
	.identifier = identifier,
	.next = next,
	.read_byte = read_byte,
	.read_string = read_string,
	.read_binary = read_binary,
	.read_string_pair = read_pair,
	.free_copy = free,
};

const struct dlq_prop_reader fake_reader_v21 = {
	.identifier = identifier,
	.next = next,
	.read_byte = read_byte,
	.read_string = read_string_v21,
	.read_binary = read_binary_v21,
	.read_string_pair = read_pair_v21,
	.free_copy = free,
};

const struct dlq_prop_reader *const fake_readers[2] = { &fake_reader_v20, &fake_reader_v21 };
