/*
 * umad_agent: the kernel side of vmad's soft-RoCE tests and bench.
 *
 * Everything here goes through the system libibumad and the kernel's MAD
 * layer (ib_umad, QP1, the kernel's RMPP): it is the reference vmad's verbs
 * transport is tested against.
 *
 *   umad_agent serve <ca> <port> [seconds]
 *     Registers two agents and answers requests until killed (or seconds,
 *     default 600, pass). Prints "READY" once registered.
 *     - class 0x09 (vendor range 1), version 1, no RMPP, methods Get/Set:
 *         attr 0xff10: GetResp echoing the request's data, with "RESPONSE"
 *                      in data bytes 0..8;
 *         attr 0xff20: never answered, only counted ("silent");
 *         attr 0xff21: GetResp with the silent count (BE32 at data 0).
 *     - class 0x30 (vendor range 2, OUI 00:14:05), version 1, RMPP v1:
 *         Get: RMPP GetResp of attr_mod data bytes of pattern();
 *         Set: checks the reassembled data (attr_mod bytes of pattern())
 *              and answers one GetResp MAD: data 0..4 = BE32 bytes
 *              received, data 4 = 1 if the pattern matched.
 *
 *   umad_agent client <ca> <port> <dgid> <sgid_index> <n> [rmpp_bytes]
 *     The libibumad requester for the bench: n class 0x09 round trips
 *     (or n RMPP Gets of rmpp_bytes) to QP1 at dgid; prints
 *     "p50_us=.. p99_us=.. n=.. failed=.. cpu_us=..": cpu_us is the process's user +
 *     system CPU (getrusage RUSAGE_SELF: every thread, a library's port thread too)
 *     over the n round trips, per round trip.
 *
 *   umad_agent smi <ca> <port>
 *     Registers a QP0 agent (class 0x81, directed-route SMPs) and prints
 *     "smi_register=<umad_register's result> errno=<errno after it>", then
 *     "issm=<umad_get_issm_path's result>" (the SM role's device).
 *
 *   umad_agent pingpong <ca> <port> <dgid> <sgid_index> <bytes>...
 *     RMPP both ways, for each size: an RMPP Set of <bytes> of pattern()
 *     (the agent checks it byte for byte), then an RMPP Get of <bytes>
 *     (checked here byte for byte). Prints "pingpong <bytes> set=ok get=ok"
 *     per size; exits 1 on any mismatch or failure.
 *
 *   umad_agent block <ca> <port>
 *     Registers a class 0x09 agent, prints "READY", blocks in
 *     umad_recv(..., -1) and prints "recv=<its result> errno=<errno>" when
 *     it returns (the device removed under it: -EIO).
 *
 *   umad_agent steps <ca> <port> <dgid> <sgid_index>
 *     Reads commands from stdin, one per line, answering each with one line:
 *       send <tid> <timeout_ms> <retries>  a class 0x09 Get (attr 0xff10) to
 *                                          QP1 at dgid: "sent <tid> r=<r>"
 *       recv <timeout_ms>                  "got tid=<tid> status=<status>",
 *                                          or "recv=<r>" when it fails
 *       state                              umad_get_port's "state=<s> phys=<p>"
 *
 * client and pingpong address QP1 at dgid, or the QPN in UMAD_AGENT_DQPN:
 * an agent on vmad's drop-in with VMAD_TRANSPORT=verbs listens on its own UD
 * QP, whose number it prints under VMAD_LOG=1 (nothing sent to QP1 reaches it).
 *
 * The data pattern is shared with the Rust tests: byte i = pattern(i).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAD_SIZE 256
#define VENDOR_HDR 40
#define BUF_SIZE (4u << 20)

static const uint8_t OUI[3] = {0x00, 0x14, 0x05};

static uint8_t pattern(uint32_t i)
{
	return (uint8_t)(i * 7 + (i >> 8) * 13 + 3);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static uint32_t be32_at(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return ntohl(v);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

/* The destination QPN: QP1, or UMAD_AGENT_DQPN (decimal or 0x hex). */
static int dest_qpn(void)
{
	const char *v = getenv("UMAD_AGENT_DQPN");
	return v && *v ? (int)strtol(v, NULL, 0) : 1;
}

/* Address `u` to `qpn` at dgid (RoCE: a GRH from GID index sgid_index), GSI Q_Key. */
static void address_to(void *u, int qpn, const char *dgid, int sgid_index)
{
	ib_user_mad_t *um = u;
	umad_set_addr(u, 0, qpn, 0, 0x80010000);
	um->addr.grh_present = 1;
	um->addr.gid_index = (uint8_t)sgid_index;
	um->addr.hop_limit = 64;
	inet_pton(AF_INET6, dgid, um->addr.gid);
}

static int open_port(const char *ca, int port)
{
	if (umad_init() < 0) {
		perror("umad_init");
		exit(1);
	}
	int fd = umad_open_port(ca, port);
	if (fd < 0) {
		fprintf(stderr, "umad_open_port(%s,%d): %s\n", ca, port, strerror(-fd));
		exit(1);
	}
	return fd;
}

/* Answer `in` with a response whose header is the request's, method GetResp. */
static void respond(int fd, int agent, void *in, void *out, size_t hdr, size_t data_len, int rmpp,
		    void (*fill)(uint8_t *data, size_t len, const uint8_t *req, void *arg), void *arg)
{
	ib_user_mad_t *u = in, *o = out;
	memset(out, 0, umad_size() + hdr + (data_len > MAD_SIZE ? data_len : MAD_SIZE));
	o->addr = u->addr;
	uint8_t *m = umad_get_mad(in), *rm = umad_get_mad(out);
	memcpy(rm, m, hdr);
	rm[3] = 0x81;
	rm[4] = rm[5] = 0;
	if (hdr == VENDOR_HDR) {
		memset(rm + 24, 0, 12);
		rm[24] = 1;              /* RMPP version */
		rm[25] = 1;              /* DATA */
		rm[26] = rmpp ? 0x01 : 0; /* Active: the kernel segments */
		memcpy(rm + 37, OUI, 3);
	}
	fill(rm + hdr, data_len, m, arg);
	size_t total = hdr + data_len;
	if (total < MAD_SIZE)
		total = MAD_SIZE;
	/* timeout 0: a response expects no response (a non-zero timeout makes
	 * the kernel report ETIMEDOUT for it later). Retries: an RMPP response
	 * resends its window when an ACK is 2 s late (the kernel's and vmad's
	 * ack timeout); with none, a starved VM (the flake hunt's runs at load 15)
	 * lost a whole 64 KiB response to one late ACK. 15 resends stay within
	 * the requesters' 60 s. */
	errno = 0;
	int r = umad_send(fd, agent, out, (int)total, 0, 15);
	if (r < 0)
		fprintf(stderr, "[agent] umad_send(%zu): %s (errno %d: %s)\n", total, strerror(-r), errno,
			strerror(errno));
}

static void fill_echo(uint8_t *d, size_t len, const uint8_t *req, void *arg)
{
	(void)arg;
	memcpy(d, req + 24, len);
	memcpy(d, "RESPONSE", 8);
}

static void fill_count(uint8_t *d, size_t len, const uint8_t *req, void *arg)
{
	(void)req;
	memset(d, 0, len);
	put_be32(d, *(uint32_t *)arg);
}

static void fill_pattern(uint8_t *d, size_t len, const uint8_t *req, void *arg)
{
	(void)req;
	(void)arg;
	for (size_t i = 0; i < len; i++)
		d[i] = pattern((uint32_t)i);
}

struct check {
	uint32_t got;
	int ok;
};

static void fill_check(uint8_t *d, size_t len, const uint8_t *req, void *arg)
{
	(void)req;
	struct check *c = arg;
	memset(d, 0, len);
	put_be32(d, c->got);
	d[4] = (uint8_t)c->ok;
}

static int serve(const char *ca, int port, int seconds)
{
	int fd = open_port(ca, port);
	long mask[16 / sizeof(long)];
	memset(mask, 0, sizeof(mask));
	mask[0] = (1 << 0x01) | (1 << 0x02); /* Get, Set */
	int a1 = umad_register(fd, 0x09, 1, 0, mask);
	uint8_t oui[3];
	memcpy(oui, OUI, 3);
	int a2 = umad_register_oui(fd, 0x30, 1, oui, mask);
	if (a1 < 0 || a2 < 0) {
		fprintf(stderr, "umad_register: %s / %s\n", strerror(-a1), strerror(-a2));
		return 1;
	}
	void *in = calloc(1, umad_size() + BUF_SIZE), *out = calloc(1, umad_size() + BUF_SIZE);
	uint32_t silent = 0, served = 0;
	double end = now_us() + seconds * 1e6;
	printf("READY\n");
	fflush(stdout);
	while (now_us() < end) {
		int len = BUF_SIZE;
		int r = umad_recv(fd, in, &len, 1000);
		if (r == -ETIMEDOUT || r == -EAGAIN)
			continue;
		if (r < 0) {
			fprintf(stderr, "[agent] umad_recv: %s\n", strerror(-r));
			return 1;
		}
		ib_user_mad_t *u = in;
		uint8_t *m = umad_get_mad(in);
		if (u->status) {
			fprintf(stderr, "[agent] a send came back with status %u\n", u->status);
			continue;
		}
		uint16_t attr = (uint16_t)((m[16] << 8) | m[17]);
		uint32_t attr_mod = be32_at(m + 20);
		served++;
		if (m[1] == 0x09) {
			if (attr == 0xff20) {
				silent++;
				continue;
			}
			if (attr == 0xff21)
				respond(fd, a1, in, out, 24, MAD_SIZE - 24, 0, fill_count, &silent);
			else
				respond(fd, a1, in, out, 24, MAD_SIZE - 24, 0, fill_echo, NULL);
		} else if (m[1] == 0x30 && m[3] == 0x01) {
			respond(fd, a2, in, out, VENDOR_HDR, attr_mod, 1, fill_pattern, NULL);
		} else if (m[1] == 0x30 && m[3] == 0x02) {
			struct check c = {.got = len > VENDOR_HDR ? (uint32_t)(len - VENDOR_HDR) : 0, .ok = 1};
			c.ok = c.got == attr_mod;
			for (uint32_t i = 0; c.ok && i < c.got; i++)
				c.ok = m[VENDOR_HDR + i] == pattern(i);
			fprintf(stderr, "[agent] RMPP Set: %u bytes (want %u), pattern %s\n", c.got,
				attr_mod, c.ok ? "ok" : "BAD");
			respond(fd, a2, in, out, VENDOR_HDR, MAD_SIZE - VENDOR_HDR, 0, fill_check, &c);
		}
	}
	fprintf(stderr, "[agent] served %u, silent %u\n", served, silent);
	return 0;
}

/* User + system CPU of the whole process so far, in microseconds. */
static double cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_usec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int client(const char *ca, int port, const char *dgid, int sgid_index, int n, int rmpp_bytes)
{
	int fd = open_port(ca, port);
	long mask[16 / sizeof(long)];
	memset(mask, 0, sizeof(mask));
	uint8_t oui[3];
	memcpy(oui, OUI, 3);
	int agent = rmpp_bytes ? umad_register_oui(fd, 0x30, 1, oui, mask)
			       : umad_register(fd, 0x09, 1, 0, mask);
	if (agent < 0) {
		fprintf(stderr, "umad_register: %s\n", strerror(-agent));
		return 1;
	}
	void *u = calloc(1, umad_size() + BUF_SIZE);
	double *lat = calloc((size_t)n, sizeof(double));
	int failed = 0;
	double cpu0 = cpu_us();
	for (int k = 0; k < n; k++) {
		ib_user_mad_t *um = u;
		memset(u, 0, umad_size() + MAD_SIZE);
		uint8_t *m = umad_get_mad(u);
		m[0] = 1;
		m[1] = rmpp_bytes ? 0x30 : 0x09;
		m[2] = 1;
		m[3] = 0x01;
		uint64_t tid = htobe64(0x1000u + (uint64_t)k);
		memcpy(m + 8, &tid, 8);
		m[16] = 0xff;
		m[17] = 0x10;
		put_be32(m + 20, (uint32_t)rmpp_bytes);
		if (rmpp_bytes) {
			m[24] = 1;
			memcpy(m + 37, OUI, 3);
		}
		address_to(u, dest_qpn(), dgid, sgid_index);
		double t0 = now_us();
		int r = umad_send(fd, agent, u, MAD_SIZE, 60000, 0);
		int len = BUF_SIZE;
		if (r == 0)
			r = umad_recv(fd, u, &len, 120000);
		lat[k] = now_us() - t0;
		if (r < 0 || um->status) {
			fprintf(stderr, "[client] round trip %d failed: r=%d status=%u\n", k, r, um->status);
			failed++;
		} else if (rmpp_bytes && len - VENDOR_HDR != rmpp_bytes) {
			fprintf(stderr, "[client] RMPP got %d bytes\n", len - VENDOR_HDR);
			failed++;
		}
	}
	double cpu = (cpu_us() - cpu0) / n;
	qsort(lat, (size_t)n, sizeof(double), cmp_double);
	printf("p50_us=%.0f p99_us=%.0f n=%d failed=%d cpu_us=%.1f\n", lat[n / 2],
	       lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], n, failed, cpu);
	return failed ? 1 : 0;
}

/* Fill the vendor range 2 header of an RMPP request (class 0x30, OUI). */
static void rmpp_request(void *u, uint8_t method, uint32_t tid, uint32_t bytes, const char *dgid,
			 int sgid_index)
{
	memset(u, 0, umad_size() + VENDOR_HDR);
	uint8_t *m = umad_get_mad(u);
	m[0] = 1;
	m[1] = 0x30;
	m[2] = 1;
	m[3] = method;
	uint64_t t = htobe64(tid);
	memcpy(m + 8, &t, 8);
	m[16] = 0xff;
	m[17] = 0x10;
	put_be32(m + 20, bytes);
	m[24] = 1;                        /* RMPP version */
	m[25] = 1;                        /* DATA */
	m[26] = method == 0x02 ? 0x01 : 0; /* Active for the Set's data */
	memcpy(m + 37, OUI, 3);
	address_to(u, dest_qpn(), dgid, sgid_index);
}

static int pingpong(const char *ca, int port, const char *dgid, int sgid_index, int nsizes,
		    char **sizes)
{
	int fd = open_port(ca, port);
	uint8_t oui[3];
	memcpy(oui, OUI, 3);
	int agent = umad_register_oui(fd, 0x30, 1, oui, NULL);
	if (agent < 0) {
		fprintf(stderr, "umad_register_oui: %s\n", strerror(-agent));
		return 1;
	}
	void *u = calloc(1, umad_size() + BUF_SIZE);
	int failed = 0;
	for (int k = 0; k < nsizes; k++) {
		uint32_t bytes = (uint32_t)atoi(sizes[k]);
		ib_user_mad_t *um = u;
		uint8_t *m = umad_get_mad(u);

		rmpp_request(u, 0x02, 0x2000u + 2 * k, bytes, dgid, sgid_index);
		for (uint32_t i = 0; i < bytes; i++)
			m[VENDOR_HDR + i] = pattern(i);
		int len = BUF_SIZE;
		int r = umad_send(fd, agent, u, (int)(VENDOR_HDR + bytes), 60000, 0);
		if (r == 0)
			r = umad_recv(fd, u, &len, 120000);
		int set_ok = r >= 0 && !um->status && be32_at(m + VENDOR_HDR) == bytes &&
			     m[VENDOR_HDR + 4] == 1;
		if (!set_ok)
			fprintf(stderr, "[pingpong] Set %u: r=%d status=%u got=%u ok=%u\n", bytes, r,
				um->status, be32_at(m + VENDOR_HDR), m[VENDOR_HDR + 4]);

		rmpp_request(u, 0x01, 0x2001u + 2 * k, bytes, dgid, sgid_index);
		len = BUF_SIZE;
		r = umad_send(fd, agent, u, MAD_SIZE, 60000, 0);
		if (r == 0)
			r = umad_recv(fd, u, &len, 120000);
		int get_ok = r >= 0 && !um->status && len - VENDOR_HDR == (int)bytes;
		for (uint32_t i = 0; get_ok && i < bytes; i++)
			get_ok = m[VENDOR_HDR + i] == pattern(i);
		if (!get_ok)
			fprintf(stderr, "[pingpong] Get %u: r=%d status=%u len=%d\n", bytes, r,
				um->status, len - VENDOR_HDR);
		printf("pingpong %u set=%s get=%s\n", bytes, set_ok ? "ok" : "BAD", get_ok ? "ok" : "BAD");
		failed += !set_ok + !get_ok;
	}
	return failed ? 1 : 0;
}

static int smi(const char *ca, int port)
{
	int fd = open_port(ca, port);
	int r = umad_register(fd, 0x81, 1, 0, NULL);
	printf("smi_register=%d errno=%d\n", r, r < 0 ? errno : 0);
	char path[256];
	printf("issm=%d\n", umad_get_issm_path(ca, port, path, sizeof(path)));
	return 0;
}

/* A class 0x09 agent that serves no methods (a requester): its id, or -1 (said why). */
static int client_agent(int fd)
{
	int agent = umad_register(fd, 0x09, 1, 0, NULL);
	if (agent < 0)
		fprintf(stderr, "umad_register: %s\n", strerror(-agent));
	return agent < 0 ? -1 : agent;
}

static int block(const char *ca, int port)
{
	int fd = open_port(ca, port);
	int agent = client_agent(fd);
	if (agent < 0)
		return 1;
	void *u = calloc(1, umad_size() + MAD_SIZE);
	int len = MAD_SIZE;
	printf("READY\n");
	int r = umad_recv(fd, u, &len, -1);
	printf("recv=%d errno=%d\n", r, r < 0 ? errno : 0);
	umad_close_port(fd);
	return 0;
}

static int steps(const char *ca, int port, const char *dgid, int sgid_index)
{
	int fd = open_port(ca, port);
	int agent = client_agent(fd);
	if (agent < 0)
		return 1;
	void *u = calloc(1, umad_size() + MAD_SIZE);
	char line[128];
	while (fgets(line, sizeof(line), stdin)) {
		unsigned tid, timeout, retries;
		int ms;
		if (sscanf(line, "send %u %u %u", &tid, &timeout, &retries) == 3) {
			memset(u, 0, umad_size() + MAD_SIZE);
			uint8_t *m = umad_get_mad(u);
			m[0] = 1;
			m[1] = 0x09;
			m[2] = 1;
			m[3] = 0x01;
			uint64_t t = htobe64(tid);
			memcpy(m + 8, &t, 8);
			m[16] = 0xff;
			m[17] = 0x10;
			address_to(u, 1, dgid, sgid_index);
			int r = umad_send(fd, agent, u, MAD_SIZE, (int)timeout, (int)retries);
			printf("sent %u r=%d\n", tid, r);
		} else if (sscanf(line, "recv %d", &ms) == 1) {
			int len = MAD_SIZE;
			int r = umad_recv(fd, u, &len, ms);
			if (r < 0) {
				printf("recv=%d\n", r);
				continue;
			}
			uint64_t t;
			memcpy(&t, umad_get_mad(u) + 8, 8);
			printf("got tid=%u status=%u\n", (unsigned)(be64toh(t) & 0xffffffffu),
			       umad_status(u));
		} else if (!strncmp(line, "state", 5)) {
			umad_port_t p;
			int r = umad_get_port(ca, port, &p);
			if (r < 0) {
				printf("state=? r=%d\n", r);
				continue;
			}
			printf("state=%u phys=%u\n", p.state, p.phys_state);
			umad_release_port(&p);
		} else {
			printf("what? %s", line);
		}
	}
	umad_close_port(fd);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && !strcmp(argv[1], "serve"))
		return serve(argv[2], atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 600);
	if (argc >= 7 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]), atoi(argv[6]),
			      argc > 7 ? atoi(argv[7]) : 0);
	if (argc >= 4 && !strcmp(argv[1], "smi"))
		return smi(argv[2], atoi(argv[3]));
	if (argc >= 7 && !strcmp(argv[1], "pingpong"))
		return pingpong(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]), argc - 6, argv + 6);
	if (argc >= 4 && !strcmp(argv[1], "block"))
		return block(argv[2], atoi(argv[3]));
	if (argc >= 6 && !strcmp(argv[1], "steps"))
		return steps(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]));
	fprintf(stderr, "usage: %s serve <ca> <port> [seconds]\n"
			"       %s client <ca> <port> <dgid> <sgid_index> <n> [rmpp_bytes]\n"
			"       %s smi <ca> <port>\n"
			"       %s pingpong <ca> <port> <dgid> <sgid_index> <bytes>...\n"
			"       %s block <ca> <port>\n"
			"       %s steps <ca> <port> <dgid> <sgid_index> < commands\n",
		argv[0], argv[0], argv[0], argv[0], argv[0], argv[0]);
	return 2;
}
