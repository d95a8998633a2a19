/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Fuzz target: the size of an outgoing PUBLISH as Mosquitto 2.1 counts it
 * and the per-client Maximum Packet Size table (packet_size.c). The input
 * is a script of 12-byte records, each one computation or table change:
 *
 *   byte 0      operation: even, a size; odd, a table change
 *   byte 1      QoS (any byte: the function takes what it is given)
 *   bytes 2-3   which length is pushed to a boundary (see near())
 *   bytes 4-11  topic, payload and properties lengths, or a client and a
 *               Maximum Packet Size
 *
 * Lengths are taken near the variable byte integer boundaries (127/128,
 * 16383/16384, 2097151/2097152, 268435455/268435456) and the 32-bit and
 * 64-bit limits, so that no sum or conversion can overflow unseen. The
 * size must equal a reference computed here in unsigned __int128, be
 * monotonic in each length, and a PUBLISH must never look smaller than its
 * parts. The table must agree with a plain array kept beside it.
 */
#include <string.h>

#include "broker/packet_size.h"
#include "fuzz.h"
#include "test_util.h"

#define CLIENTS 6

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static const uint64_t boundaries[] = {
	0, 1, 127, 128, 16383, 16384, 2097151, 2097152, 268435455, 268435456, 65535, 65536,
	UINT32_MAX - 16, UINT32_MAX, (uint64_t)UINT32_MAX + 1, UINT64_MAX / 2, UINT64_MAX - 300000000u,
};

/* A length: a boundary plus or minus a few, or the raw value. */
static uint64_t near(uint8_t sel, uint16_t raw, uint64_t cap)
{
	uint64_t v;
	if(sel & 0x80){
		v = raw;
	}else{
		uint64_t b = boundaries[(sel & 0x7F) % ARRAY_LEN(boundaries)];
		int delta = (int)(raw % 9) - 4;
		v = delta < 0 && b < (uint64_t)-delta ? 0 : b + (uint64_t)(int64_t)delta;
		if(delta > 0 && v < b) v = UINT64_MAX; /* wrapped */
	}
	return v > cap ? cap : v;
}

static unsigned ref_varint(unsigned __int128 v)
{
	if(v >= 268435456u) return 5;
	unsigned n = 1;
	while(v >= 128u){
		v >>= 7;
		n++;
	}
	return n;
}

static uint64_t ref_size(uint64_t topic, uint64_t payload, uint8_t qos, uint64_t props)
{
	unsigned __int128 rem = (unsigned __int128)2 + topic + payload + (qos > 0 ? 2u : 0u) + props + ref_varint(props);
	unsigned __int128 total = rem + ref_varint(rem);
	FUZZ_CHECK(total <= UINT64_MAX, "reference past 64 bits");
	return (uint64_t)total;
}

static uint16_t u16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const ids[CLIENTS] = {"", "a", "b", "client/with/slashes", "x", "a "};
	uint32_t model[CLIENTS] = {0};
	struct dlq_packet_limits t;
	memset(&t, 0, sizeof(t));

	for(size_t pos = 0; pos + 12 <= size && pos < 12 * 512; pos += 12){
		const uint8_t *r = data + pos;
		if(r[0] & 1){
			unsigned c = r[4] % CLIENTS;
			uint32_t max = (uint32_t)near(r[2], u16(r + 5), UINT32_MAX);
			if(r[3] & 1) max = 0; /* forget */
			int rc = packet_size__limits_set(&t, ids[c], max);
			FUZZ_CHECK(rc == 0, "packet_size__limits_set: %d", rc);
			model[c] = max;
			for(unsigned k = 0; k < CLIENTS; k++){
				FUZZ_CHECK(packet_size__limits_get(&t, ids[k]) == model[k], "client \"%s\": %u, expected %u", ids[k],
						packet_size__limits_get(&t, ids[k]), model[k]);
			}
			FUZZ_CHECK(packet_size__limits_get(&t, "never") == 0, "an unknown client has a limit");
			continue;
		}
		/* size_t topic lengths up to what a topic can be (MQTT: 65535),
		 * uint32 payloads, and property lengths up to 64 bits. */
		uint64_t topic = near(r[2], u16(r + 4), (r[3] & 1) ? 65535u : SIZE_MAX / 4);
		uint32_t payload = (uint32_t)near(r[3] >> 1, u16(r + 6), UINT32_MAX);
		uint64_t props = near(r[8], u16(r + 9), (r[11] & 1) ? UINT32_MAX : UINT64_MAX / 4);
		uint8_t qos = r[1];
		uint64_t got = packet_size__publish((size_t)topic, payload, qos, props);
		uint64_t want = ref_size(topic, payload, qos, props);
		FUZZ_CHECK(got == want, "size(%llu, %u, %u, %llu) = %llu, expected %llu", (unsigned long long)topic, payload,
				qos, (unsigned long long)props, (unsigned long long)got, (unsigned long long)want);
		FUZZ_CHECK(got > topic && got > payload && got > props, "a PUBLISH smaller than its parts");
		if(payload < UINT32_MAX){
			FUZZ_CHECK(packet_size__publish((size_t)topic, payload + 1, qos, props) > got, "not monotonic in payload");
		}
		FUZZ_CHECK(packet_size__publish((size_t)topic + 1, payload, qos, props) > got, "not monotonic in topic");
		FUZZ_CHECK(packet_size__publish((size_t)topic, payload, qos, props + 1) > got, "not monotonic in properties");
		unsigned vb = packet_size__varint_bytes((uint32_t)props);
		FUZZ_CHECK(vb == ref_varint((uint32_t)props), "varint_bytes(%u) = %u", (unsigned)props, vb);
		FUZZ_CHECK(packet_size__user_property_len(r[10], r[11]) == 5u + r[10] + r[11], "user property length");
	}
	packet_size__limits_cleanup(&t);
	return 0;
}
