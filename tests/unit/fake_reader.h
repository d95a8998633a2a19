/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Property readers for unit tests (prop_reader.h): libmosquitto's own
 * functions, which give "" for an empty string as Mosquitto 2.0 does, and a
 * wrapper of them that gives NULL for an empty string, name or binary value,
 * as 2.1.2's do (libcommon/property_common.c).
 */
#ifndef DLQ_FAKE_READER_H
#define DLQ_FAKE_READER_H

#include "broker/prop_reader.h"

extern const struct dlq_prop_reader fake_reader_v20;
extern const struct dlq_prop_reader fake_reader_v21;

/* Both, for Check loop tests: fake_readers[_i], _i in [0, 2). */
extern const struct dlq_prop_reader *const fake_readers[2];

#endif
