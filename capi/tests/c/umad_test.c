/*
 * vmad's libibumad, driven through the SYSTEM <infiniband/umad.h> (Debian libibumad-dev)
 * on the embedded fabric: vmadsim0 (LID 1) <-> vmadsim1 (LID 2).
 *
 * Every sentence of the seeds umad_recv(3), umad_poll(3), umad_status(3) about arguments,
 * return values and errors has a check here (tagged "recv:", "poll:", "status:"), and so
 * do libibumad's return-value quirks (anchors §1.3, tagged "quirk:").
 *
 * Usage: umad_test [main|faults|lossy|badenv|verbs]; prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <infiniband/umad.h>
#include <infiniband/umad_str.h>

#ifdef USE_VMAD_HEADER
/* Built through `pkg-config ibumad` against vmad's own header, which declares these. */
#define vmad_ca_pair umad_ca_pair
#else
/* IBUMAD_1.3 / 1.4: not declared by older system headers. */
struct vmad_ca_pair {
	char smi_name[UMAD_CA_NAME_LEN];
	uint32_t smi_preferred_port;
	char gsi_name[UMAD_CA_NAME_LEN];
	uint32_t gsi_preferred_port;
};
int umad_open_smi_port(const char *ca_name, int portnum);
int umad_get_smi_gsi_pairs(struct vmad_ca_pair cas[], size_t max);
int umad_get_smi_gsi_pair_by_ca_name(const char *devname, uint8_t portnum,
				     struct vmad_ca_pair *ca, unsigned enforce_smi);
#endif

#include "check.h"

#define MAD_LEN 256
#define VENDOR_CLASS 0x0a /* vendor range 1: no OUI, no RMPP */
#define SA_CLASS 0x03
/* The timeout of a request the test expects answered, and the limit of a wait for
 * something that must come: both far beyond what any loaded machine takes (the flake
 * hunt found 1 s and 2 s exceeded under valgrind with load 15 on 2 cores), so that the
 * answer, not the clock, ends each wait; they only keep a broken build from hanging. */
#define ANSWERED_MS 60000
#define GUARD_MS 60000
/* The lossy test's per-attempt timeout: a retry must follow a loss, so this one is a
 * real timeout; seven attempts of 1 s leave a loaded server 7 s to answer once. */
#define LOSSY_MS 1000

static void *alloc_umad(size_t data)
{
	void *p = umad_alloc(1, umad_size() + data);
	if (!p) {
		perror("umad_alloc");
		exit(2);
	}
	return p;
}

/* A 24-byte MAD header at mad. */
static void mad_hdr(uint8_t *mad, uint8_t class, uint8_t version, uint8_t method,
		    uint64_t tid, uint16_t attr)
{
	mad[0] = 1;
	mad[1] = class;
	mad[2] = version;
	mad[3] = method;
	uint64_t be = htobe64(tid);
	memcpy(mad + 8, &be, 8);
	uint16_t a = htobe16(attr);
	memcpy(mad + 16, &a, 2);
}

static uint64_t mad_tid(const uint8_t *mad)
{
	uint64_t be;
	memcpy(&be, mad + 8, 8);
	return be64toh(be);
}

static long all_methods[2] = { -1L, -1L };

struct world {
	int a, b;      /* ports on vmadsim0 and vmadsim1 */
	int client;    /* agent on a: vendor class, client only */
	int server;    /* agent on b: vendor class, serves every method */
};

/* Send a vendor Get from a's client to b (LID 2, QP 1). */
static int send_get(struct world *w, uint64_t tid, int timeout_ms, int retries, int dlid)
{
	uint8_t *u = alloc_umad(MAD_LEN);
	mad_hdr(umad_get_mad(u), VENDOR_CLASS, 1, 0x01, tid, 0x0010);
	umad_set_addr(u, dlid, 1, 0, 0x80010000);
	int r = umad_send(w->a, w->client, u, MAD_LEN, timeout_ms, retries);
	free(u);
	return r;
}

static void test_header_functions(void)
{
	CHECK(umad_size() == 64, "umad_size is the 64-byte header");
	uint8_t *u = alloc_umad(MAD_LEN);
	CHECK((uint8_t *)umad_get_mad(u) == u + 64, "umad_get_mad = umad + 64");
	ib_mad_addr_t *addr = umad_get_mad_addr(u);
	CHECK((uint8_t *)addr == u + 20, "umad_get_mad_addr = &umad->addr");
	CHECK(umad_set_addr(u, 0x1234, 1, 3, 0x80010000) == 0, "umad_set_addr returns 0");
	CHECK(addr->lid == htobe16(0x1234) && addr->qpn == htobe32(1) &&
		      addr->qkey == htobe32(0x80010000) && addr->sl == 3,
	      "umad_set_addr stores big-endian values");
	CHECK(umad_set_addr_net(u, htobe16(7), htobe32(1), 2, htobe32(0x80010000)) == 0 &&
		      addr->lid == htobe16(7) && addr->sl == 2,
	      "umad_set_addr_net stores as given");
	ib_mad_addr_t g = { 0 };
	g.gid[15] = 0x42;
	g.hop_limit = 9;
	g.traffic_class = 3;
	g.flow_label = 0x12345;
	g.gid_index = 5;
	CHECK(umad_set_grh(u, &g) == 0 && addr->grh_present == 1 && addr->gid[15] == 0x42 &&
		      addr->hop_limit == 9 && addr->flow_label == htobe32(0x12345) &&
		      addr->gid_index == 0,
	      "umad_set_grh copies GRH fields, flow label to BE, not gid_index");
	CHECK(umad_set_grh(u, NULL) == 0 && addr->grh_present == 0, "umad_set_grh(NULL) clears");
	memset(addr->reserved, 0xaa, sizeof(addr->reserved));
	CHECK(umad_set_pkey(u, 3) == 0 && umad_get_pkey(u) == 3 && addr->pkey_index == 3,
	      "umad_set_pkey/umad_get_pkey (host-order pkey_index)");
	CHECK(addr->reserved[0] == 0xaa && addr->reserved[5] == 0xaa,
	      "umad_set_pkey writes pkey_index only, as libibumad (the reserved bytes stay)");
	((struct ib_user_mad *)u)->status = ETIMEDOUT;
	CHECK(umad_status(u) == ETIMEDOUT, "umad_status reads the header status");
	umad_dump(u);
	umad_addr_dump(addr);
	free(u);
}

static void test_strings_and_debug(void)
{
	CHECK(strcmp(umad_class_str(0x03), "SubnAdm") == 0, "umad_class_str(SA)");
	CHECK(umad_class_str(0x77) != NULL, "umad_class_str(unknown) is a string");
	CHECK(strcmp(umad_method_str(0x03, 0x92), "GetTableResp") == 0, "umad_method_str");
	CHECK(strcmp(umad_attribute_str(0x01, htobe16(0x11)), "NodeInfo") == 0,
	      "umad_attribute_str takes a BE attribute id");
	CHECK(umad_common_mad_status_str(htobe16(0x000c)) != NULL, "umad_common_mad_status_str");
	CHECK(strcmp(umad_sa_mad_status_str(htobe16(0x0300)), "No records") == 0,
	      "umad_sa_mad_status_str decodes bits 8-14");
	CHECK(umad_debug(2) == 2 && umad_debug(-1) == 2 && umad_debug(0) == 0,
	      "umad_debug sets levels >= 0 and returns the level");
}

static void test_discovery(void)
{
	char names[4][UMAD_CA_NAME_LEN];
	memset(names, 0, sizeof(names));
	int n = umad_get_cas_names(names, 4);
	CHECK(n == 2 && strcmp(names[0], "vmadsim0") == 0 && strcmp(names[1], "vmadsim1") == 0,
	      "umad_get_cas_names lists vmadsim0, vmadsim1 (got %d)", n);
	CHECK(umad_get_cas_names(names, 1) == 1, "umad_get_cas_names honours max");

	umad_ca_t ca;
	memset(&ca, 0xa5, sizeof(ca));
	CHECK(umad_get_ca("vmadsim1", &ca) == 0, "umad_get_ca(vmadsim1)");
	CHECK(strcmp(ca.ca_name, "vmadsim1") == 0 && ca.node_type == 1 && ca.numports == 1,
	      "umad_get_ca: name, node type 1, one port");
	CHECK(ca.ports[0] == NULL && ca.ports[1] != NULL && ca.ports[2] == NULL,
	      "umad_get_ca: ports[1] only");
	if (ca.ports[1]) {
		CHECK(ca.ports[1]->base_lid == 2 && ca.ports[1]->portnum == 1 &&
			      ca.ports[1]->state == 4 && ca.ports[1]->pkeys_size > 0 &&
			      strcmp(ca.ports[1]->link_layer, "InfiniBand") == 0,
		      "umad_get_ca: port 1 is LID 2, active, IB, with P_Keys");
	}
	CHECK(umad_release_ca(&ca) == 0, "umad_release_ca");
	CHECK(umad_get_ca("nosuchca", &ca) == -ENODEV, "umad_get_ca(unknown) = -ENODEV");

	umad_port_t port;
	CHECK(umad_get_port("vmadsim0", 1, &port) == 0 && port.base_lid == 1 &&
		      port.pkeys != NULL && port.pkeys[0] == 0xffff,
	      "umad_get_port(vmadsim0, 1): LID 1, malloc'd P_Key table");
	__be64 guid = port.port_guid;
	CHECK(umad_release_port(&port) == 0 && port.pkeys == NULL, "umad_release_port frees pkeys");
	CHECK(umad_get_port("vmadsim0", 5, &port) < 0, "umad_get_port(no such port) fails");
	CHECK(umad_get_port(NULL, 0, &port) == 0 && strcmp(port.ca_name, "vmadsim0") == 0,
	      "umad_get_port(NULL, 0): first CA, first active port");
	umad_release_port(&port);

	__be64 guids[4] = { 1, 1, 1, 1 };
	CHECK(umad_get_ca_portguids("vmadsim0", guids, 4) == 2 && guids[0] == 0 &&
		      guids[1] == guid,
	      "umad_get_ca_portguids: numports + 1, [0] = 0, [1] = port GUID");
	CHECK(umad_get_ca_portguids("vmadsim0", guids, 1) == -ENOMEM,
	      "umad_get_ca_portguids: -ENOMEM when max is too small");
	CHECK(umad_get_ca_portguids("nosuchca", guids, 4) == -ENODEV,
	      "umad_get_ca_portguids(unknown) = -ENODEV");

	struct umad_device_node *head = umad_get_ca_device_list(), *p;
	int count = 0;
	for (p = head; p; p = p->next)
		count++;
	CHECK(count == 2, "umad_get_ca_device_list: 2 nodes");
	CHECK(umad_sort_ca_device_list(&head, 0) == 0 && head &&
		      strcmp(head->ca_name, "vmadsim0") == 0,
	      "umad_sort_ca_device_list");
	umad_free_ca_device_list(head);

	struct vmad_ca_pair pairs[4];
	CHECK(umad_get_smi_gsi_pairs(pairs, 4) == 2 && strcmp(pairs[1].smi_name, "vmadsim1") == 0 &&
		      strcmp(pairs[1].gsi_name, "vmadsim1") == 0 && pairs[1].gsi_preferred_port == 1,
	      "umad_get_smi_gsi_pairs: each CA is its own SMI and GSI");
	struct vmad_ca_pair pair;
	CHECK(umad_get_smi_gsi_pair_by_ca_name("vmadsim0", 1, &pair, 0) == 0 &&
		      strcmp(pair.smi_name, "vmadsim0") == 0,
	      "umad_get_smi_gsi_pair_by_ca_name: found = 0");
	CHECK(umad_get_smi_gsi_pair_by_ca_name("vmadsim0", 7, &pair, 0) == 1,
	      "umad_get_smi_gsi_pair_by_ca_name: no such port = 1");
	CHECK(umad_get_smi_gsi_pair_by_ca_name("nosuchca", 1, &pair, 0) == -ENODEV,
	      "umad_get_smi_gsi_pair_by_ca_name: no such CA = -ENODEV");

	char path[256];
	CHECK(umad_get_issm_path("vmadsim0", 1, path, sizeof(path)) == 0, "umad_get_issm_path");
	int fd = open(path, O_NONBLOCK);
	CHECK(fd >= 0, "the issm path can be opened (%s)", path);
	if (fd >= 0)
		close(fd);
	CHECK(umad_get_issm_path("nosuchca", 1, path, sizeof(path)) == -ENODEV,
	      "umad_get_issm_path(unknown CA) = -ENODEV");
	CHECK(umad_get_issm_path("vmadsim0", 9, path, sizeof(path)) == -EINVAL,
	      "umad_get_issm_path(no such port) = -EINVAL");
}

static void open_world(struct world *w)
{
	w->a = umad_open_port("vmadsim0", 1);
	w->b = umad_open_port("vmadsim1", 1);
	CHECK(w->a >= 0 && w->b >= 0, "umad_open_port both CAs (%d, %d)", w->a, w->b);
	w->client = umad_register(w->a, VENDOR_CLASS, 1, 0, NULL);
	w->server = umad_register(w->b, VENDOR_CLASS, 1, 0, all_methods);
	CHECK(w->client >= 0 && w->server >= 0, "umad_register client and server");
	if (w->a < 0 || w->b < 0 || w->client < 0 || w->server < 0) {
		printf("%d passed, %d failed\n", passed, failed + 1);
		exit(1);
	}
}

static void test_fd(struct world *w)
{
	CHECK(umad_get_fd(w->a) >= 0 && umad_get_fd(w->a) != umad_get_fd(w->b),
	      "umad_get_fd: a descriptor per port");
	CHECK(umad_get_fd(12345) == -EINVAL, "umad_get_fd(bad port) = -EINVAL");
	CHECK(fcntl(umad_get_fd(w->a), F_GETFD) >= 0, "umad_get_fd is a real descriptor");
	struct pollfd pfd = { .fd = umad_get_fd(w->b), .events = POLLIN };
	CHECK(poll(&pfd, 1, 0) == 0, "poll(2) on umad_get_fd: not readable when empty");
	CHECK(send_get(w, 0x1001, 0, 0, 2) == 0, "umad_send a Get");
	CHECK(poll(&pfd, 1, GUARD_MS) == 1 && (pfd.revents & POLLIN), "poll(2): readable once queued");
	uint8_t *u = alloc_umad(MAD_LEN);
	int len = MAD_LEN;
	CHECK(umad_recv(w->b, u, &len, 0) == w->server, "recv the Get");
	CHECK(poll(&pfd, 1, 0) == 0, "poll(2): not readable once drained");
	free(u);
}

static void test_recv(struct world *w)
{
	uint8_t *u = alloc_umad(MAD_LEN);
	int len;

	/* recv: "on success return the agentid"; header and length filled in. (A response is
	 * matched only to a request sent with a timeout, as the kernel does.) */
	CHECK(send_get(w, 0x2002, ANSWERED_MS, 0, 2) == 0, "umad_send");
	len = MAD_LEN;
	int r = umad_recv(w->b, u, &len, -1);
	CHECK(r == w->server, "recv: returns the receiving agent id (%d)", r);
	CHECK(len == MAD_LEN, "recv: *length is the received data length (%d)", len);
	struct ib_user_mad *h = (struct ib_user_mad *)u;
	CHECK(h->agent_id == (uint32_t)w->server && h->status == 0 &&
		      h->length == umad_size() + MAD_LEN,
	      "recv: header agent id, status 0, length");
	CHECK(be16toh(h->addr.lid) == 1 && be32toh(h->addr.qpn) == 1,
	      "recv: source address is LID 1, QP 1");
	CHECK((mad_tid(umad_get_mad(u)) & 0xffffffff) == 0x2002 && ((uint8_t *)umad_get_mad(u))[3] == 1,
	      "recv: the Get, with its TID's low word");
	CHECK(umad_status(u) == 0, "status: 0 for a successful receive");

	/* The server answers; the client receives the response. */
	uint8_t *m = umad_get_mad(u);
	m[3] = 0x81;
	memset(m + 24, 0x5a, 32);
	CHECK(umad_send(w->b, w->server, u, MAD_LEN, 0, 0) == 0, "umad_send the GetResp");
	len = MAD_LEN;
	CHECK(umad_recv(w->a, u, &len, GUARD_MS) == w->client, "recv: client gets the response");
	CHECK(mad_tid(umad_get_mad(u)) & 0xffffffff && ((uint8_t *)umad_get_mad(u))[3] == 0x81 &&
		      ((uint8_t *)umad_get_mad(u))[24] == 0x5a,
	      "recv: response payload intact");

	/* recv: "A timeout_ms parameter of zero indicates a non blocking read": -EWOULDBLOCK. */
	len = MAD_LEN;
	errno = 0;
	r = umad_recv(w->a, u, &len, 0);
	CHECK(r == -EWOULDBLOCK && errno == EWOULDBLOCK,
	      "recv: timeout 0 on an empty queue = -EWOULDBLOCK, errno set (r=%d)", r);

	/* A positive timeout that passes: -ETIMEDOUT (libibumad's poll-then-read). */
	len = MAD_LEN;
	errno = 0;
	r = umad_recv(w->a, u, &len, 20);
	CHECK(r == -ETIMEDOUT && errno == ETIMEDOUT, "recv: positive timeout passes = -ETIMEDOUT");

	/* recv: "-EINVAL ... *length is less than the minimum supported" (256). */
	len = 255;
	errno = 0;
	CHECK(umad_recv(w->a, u, &len, 0) == -EINVAL && errno == EINVAL,
	      "recv: *length < 256 = -EINVAL");
	/* recv: "-EINVAL invalid port handle". */
	len = MAD_LEN;
	CHECK(umad_recv(12345, u, &len, 0) == -EINVAL, "recv: invalid port handle = -EINVAL");
	CHECK(umad_recv(-1, u, &len, 0) == -EINVAL, "recv: negative port handle = -EINVAL");
	CHECK(umad_recv(w->a, NULL, &len, 0) == -EINVAL && umad_recv(w->a, u, NULL, 0) == -EINVAL,
	      "recv: NULL buffer or length = -EINVAL");
	free(u);
}

static pid_t this_thread(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Until thread `*tid` of this process (0: not started yet) sleeps in the kernel in a
 * wait (/proc's wchan names a futex or a poll): it has blocked in the call under test
 * (after vmad's spin). Looked at every millisecond; a minute only guards a hang. */
static void wait_until_blocked(volatile pid_t *tid)
{
	for (int i = 0; i < 60 * 1000; i++) {
		char path[64], wchan[128] = "";
		if (*tid) {
			snprintf(path, sizeof path, "/proc/self/task/%d/wchan", (int)*tid);
			FILE *f = fopen(path, "r");
			if (f) {
				if (!fgets(wchan, sizeof wchan, f))
					wchan[0] = 0;
				fclose(f);
			}
			if (strstr(wchan, "futex") || strstr(wchan, "poll"))
				return;
		}
		usleep(1000);
	}
	CHECK(0, "thread %d never blocked", (int)*tid);
}

struct delayed { struct world *w; volatile pid_t receiver; };

static void *delayed_send(void *arg)
{
	struct delayed *d = arg;
	wait_until_blocked(&d->receiver);
	send_get(d->w, 0x3003, 0, 0, 2);
	return NULL;
}

static void test_recv_blocks(struct world *w)
{
	/* recv: "A negative timeout_ms makes the function block until a packet is received." */
	struct delayed d = { w, this_thread() };
	pthread_t t;
	pthread_create(&t, NULL, delayed_send, &d);
	uint8_t *u = alloc_umad(MAD_LEN);
	int len = MAD_LEN;
	int r = umad_recv(w->b, u, &len, -1);
	CHECK(r == w->server && (mad_tid(umad_get_mad(u)) & 0xffffffff) == 0x3003,
	      "recv: negative timeout blocks until the packet arrives");
	pthread_join(t, NULL);
	free(u);
}

static void test_poll(struct world *w)
{
	/* poll: "-ETIMEDOUT poll operation timed out". */
	errno = 0;
	int r = umad_poll(w->b, 20);
	CHECK(r == -ETIMEDOUT, "poll: nothing within timeout = -ETIMEDOUT (r=%d)", r);
	CHECK(umad_poll(w->b, 0) == -ETIMEDOUT, "poll: timeout 0 on empty = -ETIMEDOUT");
	/* poll: "-EINVAL invalid port handle". */
	CHECK(umad_poll(12345, 0) == -EINVAL, "poll: invalid port handle = -EINVAL");
	/* poll: "once a packet is ready to be read, the function returns 0"; then recv reads it. */
	send_get(w, 0x4004, 0, 0, 2);
	CHECK(umad_poll(w->b, GUARD_MS) == 0, "poll: returns 0 once a packet is ready");
	CHECK(umad_poll(w->b, 0) == 0, "poll: still 0 while it is queued");
	uint8_t *u = alloc_umad(MAD_LEN);
	int len = MAD_LEN;
	/* poll: "use a timeout_ms parameter of zero to umad_recv() to ensure a non-blocking
	 * read": after poll, another reader takes the packet; our recv(…, 0) does not block. */
	CHECK(umad_recv(w->b, u, &len, 0) == w->server, "poll then recv(0) reads the packet");
	len = MAD_LEN;
	CHECK(umad_recv(w->b, u, &len, 0) == -EWOULDBLOCK,
	      "poll: a successful poll does not guarantee the next recv has data; recv(0) = -EWOULDBLOCK");
	free(u);
}

/* poll with two threads, as umad_poll(3) advises: poll, then a non-blocking recv, which
 * may find that another thread took the packet first. Each round one packet is sent; both
 * threads start together (a barrier), both poll until it is there, and only once both have
 * seen it (a second barrier) do both call recv(…, 0) at the same moment: exactly one gets
 * the packet, the other -EWOULDBLOCK. Many rounds, every outcome counted. */
enum { RACE_ROUNDS = 200 };
static pthread_barrier_t race_barrier;
struct racer { struct world *w; int polled, won, would_block, other; };

static void *race(void *arg)
{
	struct racer *r = arg;
	uint8_t *u = alloc_umad(MAD_LEN);
	for (int round = 0; round < RACE_ROUNDS; round++) {
		pthread_barrier_wait(&race_barrier); /* the round's packet was sent */
		r->polled += umad_poll(r->w->b, GUARD_MS) == 0;
		pthread_barrier_wait(&race_barrier); /* both threads saw it ready */
		int len = MAD_LEN;
		int got = umad_recv(r->w->b, u, &len, 0);
		if (got == r->w->server)
			r->won++;
		else if (got == -EWOULDBLOCK || got == -EAGAIN)
			r->would_block++;
		else
			r->other++;
		pthread_barrier_wait(&race_barrier); /* round over */
	}
	free(u);
	return NULL;
}

static void test_poll_threads(struct world *w)
{
	struct racer r[2] = { { .w = w }, { .w = w } };
	pthread_t t[2];
	pthread_barrier_init(&race_barrier, NULL, 3);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, race, &r[i]);
	int sent = 0, rounds_won_once = 0;
	for (int round = 0; round < RACE_ROUNDS; round++) {
		int before = r[0].won + r[1].won;
		sent += send_get(w, 0x40000 + round, 0, 0, 2) == 0;
		pthread_barrier_wait(&race_barrier);
		pthread_barrier_wait(&race_barrier);
		pthread_barrier_wait(&race_barrier);
		rounds_won_once += r[0].won + r[1].won == before + 1;
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&race_barrier);
	CHECK(sent == RACE_ROUNDS, "race: %d packets sent", sent);
	CHECK(r[0].polled == RACE_ROUNDS && r[1].polled == RACE_ROUNDS,
	      "poll: both threads see each packet ready (%d, %d of %d)", r[0].polled, r[1].polled,
	      RACE_ROUNDS);
	CHECK(rounds_won_once == RACE_ROUNDS && r[0].won + r[1].won == RACE_ROUNDS,
	      "two threads recv(0) after poll: each packet received exactly once (%d rounds of %d)",
	      rounds_won_once, RACE_ROUNDS);
	CHECK(r[0].would_block + r[1].would_block == RACE_ROUNDS && r[0].other + r[1].other == 0,
	      "the loser of each race gets -EWOULDBLOCK (%d of %d; other results %d)",
	      r[0].would_block + r[1].would_block, RACE_ROUNDS, r[0].other + r[1].other);
	CHECK(umad_poll(w->b, 0) == -ETIMEDOUT, "queue empty after the race");
}

struct blocked { struct world *w; int poll; volatile pid_t tid; };

static void *block_forever(void *arg)
{
	struct blocked *b = arg;
	b->tid = this_thread();
	uint8_t buf[64 + MAD_LEN];
	int len = MAD_LEN;
	if (b->poll)
		umad_poll(b->w->a, -1);
	else
		umad_recv(b->w->a, buf, &len, -1);
	return NULL;
}

/* OpenSM stops its receiver thread with pthread_cancel + pthread_join while it blocks in
 * umad_recv(..., -1): the blocking calls must be cancellation points. */
static void test_cancel(struct world *w)
{
	for (int poll_mode = 0; poll_mode < 2; poll_mode++) {
		struct blocked b = { w, poll_mode, 0 };
		pthread_t t;
		void *ret = NULL;
		pthread_create(&t, NULL, block_forever, &b);
		wait_until_blocked(&b.tid);
		pthread_cancel(t);
		pthread_join(t, &ret);
		CHECK(ret == PTHREAD_CANCELED, "a thread blocked in %s(-1) is cancelled and joined",
		      poll_mode ? "umad_poll" : "umad_recv");
	}
}

static void test_status_timeout(struct world *w)
{
	/* status: "ETIMEDOUT means the packet came with a send-timeout indication. In this case,
	 * the transaction ID will be set to the TID of the original request." LID 9 does not exist. */
	CHECK(send_get(w, 0x5005, 30, 1, 9) == 0, "umad_send a Get to a LID that does not exist");
	uint8_t *u = alloc_umad(MAD_LEN);
	int len = MAD_LEN;
	int r = umad_recv(w->a, u, &len, GUARD_MS);
	CHECK(r == w->client, "status: the timeout comes back to the sending agent (r=%d)", r);
	CHECK(umad_status(u) == ETIMEDOUT, "status: ETIMEDOUT for a send-timeout completion");
	CHECK((mad_tid(umad_get_mad(u)) & 0xffffffff) == 0x5005,
	      "status: the TID is the original request's");
	CHECK(len == 24, "status: the timeout carries the request's 24-byte MAD header (len=%d)", len);
	CHECK(be16toh(umad_get_mad_addr(u)->lid) == 9, "status: the original destination");
	free(u);
}

static void test_quirks(struct world *w)
{
	uint8_t *u = alloc_umad(1024);
	mad_hdr(umad_get_mad(u), VENDOR_CLASS, 1, 0x01, 0x6006, 0x10);
	umad_set_addr(u, 2, 1, 0, 0x80010000);

	/* umad_send: -EIO always, errno = the real cause. */
	errno = 0;
	int r = umad_send(w->a, 31, u, MAD_LEN, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "quirk: send from an unregistered agent = -EIO, errno EINVAL (r=%d errno=%d)", r, errno);
	errno = 0;
	r = umad_send(w->a, w->client, u, 600, 0, 0);
	CHECK(r == -EIO && errno != 0 && errno != EIO,
	      "quirk: a 600-byte non-RMPP send = -EIO, errno the cause (%d)", errno);
	errno = 0;
	r = umad_send(12345, w->client, u, MAD_LEN, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "quirk: send on a bad port = -EIO, errno EINVAL");
	r = umad_send(w->a, w->client, u, MAD_LEN, ANSWERED_MS, 0);
	CHECK(r == 0, "send a request with a timeout");
	errno = 0;
	r = umad_send(w->a, w->client, u, MAD_LEN, ANSWERED_MS, 0);
	CHECK(r == -EIO && errno == EINVAL, "quirk: a duplicate outstanding TID = -EIO, errno EINVAL");
	struct ib_user_mad *h = (struct ib_user_mad *)u;
	CHECK(h->agent_id == (uint32_t)w->client && h->timeout_ms == ANSWERED_MS && h->retries == 0,
	      "umad_send writes agent id, timeout and retries into the header");
	/* Drain the request at b and answer it so nothing is outstanding. */
	int len = MAD_LEN;
	umad_recv(w->b, u, &len, GUARD_MS);
	((uint8_t *)umad_get_mad(u))[3] = 0x81;
	umad_send(w->b, w->server, u, MAD_LEN, 0, 0);
	len = MAD_LEN;
	CHECK(umad_recv(w->a, u, &len, GUARD_MS) == w->client, "the response to the first request");

	/* umad_register: -EPERM, errno preserved. */
	errno = 0;
	r = umad_register(w->b, VENDOR_CLASS, 1, 0, all_methods);
	CHECK(r == -EPERM && errno == EINVAL, "quirk: register a method in use = -EPERM, errno EINVAL");
	errno = 0;
	r = umad_register(w->a, 0, 1, 0, NULL);
	CHECK(r == -EPERM && errno == EINVAL, "quirk: register class 0 = -EPERM, errno EINVAL");
	r = umad_register(12345, VENDOR_CLASS, 1, 0, NULL);
	CHECK(r == -EPERM, "quirk: register on a bad port = -EPERM");
	uint8_t oui[3] = { 0x00, 0x14, 0x05 };
	CHECK(umad_register_oui(w->a, 0x20, 0, oui, NULL) == -EINVAL,
	      "umad_register_oui outside 0x30-0x4f = -EINVAL");
	int vo = umad_register_oui(w->a, 0x30, 0, oui, NULL);
	CHECK(vo >= 0, "umad_register_oui(0x30)");

	/* umad_register2: 0 or a positive errno. */
	struct umad_reg_attr attr = { .mgmt_class = 0x31, .mgmt_class_version = 1, .oui = 0 };
	uint32_t id = 999;
	CHECK(umad_register2(w->a, &attr, &id) == EINVAL, "quirk: register2 vendor class, OUI 0 = +EINVAL");
	CHECK(umad_register2(w->a, NULL, &id) == EINVAL, "quirk: register2(NULL attr) = +EINVAL");
	CHECK(umad_register2(w->a, &attr, NULL) == EINVAL, "quirk: register2(NULL id) = +EINVAL");
	attr.oui = 0x001405;
	attr.flags = UMAD_USER_RMPP;
	CHECK(umad_register2(w->a, &attr, &id) == 0 && id < 32, "register2 succeeds: 0, id written");

	/* umad_unregister: the raw ioctl result. */
	errno = 0;
	CHECK(umad_unregister(w->a, 30) == -1 && errno == EINVAL,
	      "quirk: unregister an unknown agent = -1, errno EINVAL");
	CHECK(umad_unregister(w->a, (int)id) == 0 && umad_unregister(w->a, vo) == 0, "unregister = 0");
	free(u);
}

/* An SA GetTable answered with a 2,000-byte RMPP response (RMPP on both sides). */
static void test_rmpp_enospc(void)
{
	int a = umad_open_smi_port("vmadsim0", 1); /* the SMI port is the port itself */
	int b = umad_open_port("vmadsim1", 1);
	int sa_client = umad_register(a, SA_CLASS, 2, 1, NULL);
	long mask[2] = { 0, 0 };
	mask[0] |= 1L << 0x12; /* GetTable */
	int sa_server = umad_register(b, SA_CLASS, 2, 1, mask);
	CHECK(a >= 0 && b >= 0 && sa_client >= 0 && sa_server >= 0, "SA agents registered");

	enum { DATA = 2000 };
	uint8_t *u = alloc_umad(MAD_LEN);
	mad_hdr(umad_get_mad(u), SA_CLASS, 2, 0x12, 0x7007, 0x0011);
	umad_set_addr(u, 2, 1, 0, 0x80010000);
	CHECK(umad_send(a, sa_client, u, MAD_LEN, ANSWERED_MS, 0) == 0, "send SA GetTable");
	int len = MAD_LEN;
	CHECK(umad_recv(b, u, &len, GUARD_MS) == sa_server, "SA server gets the GetTable");

	uint8_t *resp = alloc_umad(56 + DATA);
	memcpy(resp, u, umad_size() + 24);
	uint8_t *m = umad_get_mad(resp);
	m[3] = 0x92;
	m[24] = 1;    /* RMPP version */
	m[25] = 1;    /* DATA */
	m[26] = 0x01; /* Active */
	uint16_t ao = htobe16(8); /* attribute offset, 8-byte words */
	memcpy(m + 44, &ao, 2);
	for (int i = 0; i < DATA; i++)
		m[56 + i] = (uint8_t)(i * 7 + 1);
	CHECK(umad_send(b, sa_server, resp, 56 + DATA, 0, 0) == 0, "send a 2,056-byte RMPP response");

	/* recv: "If the buffer is not large enough, the size of the umad buffer needed is
	 * returned in *length" and -ENOSPC; the message stays queued. */
	len = MAD_LEN;
	errno = 0;
	int r = umad_recv(a, u, &len, GUARD_MS);
	CHECK(r == -ENOSPC && errno == ENOSPC, "recv: too small a buffer = -ENOSPC (r=%d)", r);
	CHECK(len == 56 + DATA, "recv: *length = the data length needed (%d)", len);
	CHECK(umad_poll(a, 0) == 0, "recv: after ENOSPC the message is still queued");
	uint8_t *big = alloc_umad(len);
	int len2 = len;
	r = umad_recv(a, big, &len2, 0);
	CHECK(r == sa_client && len2 == 56 + DATA, "recv: retry with the needed size gets it");
	/* recv: "the header of the first RMPP packet is returned as the header of the buffer and
	 * the buffer data contains the coalesced data section of each subsequent packet." */
	uint8_t *bm = umad_get_mad(big);
	int same = 1;
	for (int i = 0; i < DATA; i++)
		if (bm[56 + i] != (uint8_t)(i * 7 + 1))
			same = 0;
	CHECK(same && bm[3] == 0x92 && (bm[26] & 1), "recv: RMPP data coalesced, first header kept");
	free(big);
	free(resp);
	free(u);
	CHECK(umad_close_port(a) == 0 && umad_close_port(b) == 0, "close the SA ports");
}

static void test_smp(struct world *w)
{
	int smi = umad_register(w->a, 0x01, 1, 0, NULL);
	CHECK(smi >= 0, "register an SMI agent (class 0x01)");
	uint8_t *u = alloc_umad(MAD_LEN);
	mad_hdr(umad_get_mad(u), 0x01, 1, 0x01, 0x8008, 0x0011);
	umad_set_addr(u, 2, 0, 0, 0);
	CHECK(umad_send(w->a, smi, u, MAD_LEN, ANSWERED_MS, 2) == 0, "send SubnGet(NodeInfo) to LID 2");
	int len = MAD_LEN;
	int r = umad_recv(w->a, u, &len, GUARD_MS);
	uint8_t *m = umad_get_mad(u);
	CHECK(r == smi && umad_status(u) == 0 && m[3] == 0x81 && m[64 + 1] == 1,
	      "vmadsim1's SMA answers NodeInfo (node type CA)");
	free(u);
}

static void test_close(struct world *w)
{
	CHECK(umad_close_port(w->a) == 0 && umad_close_port(w->b) == 0, "umad_close_port = 0");
	uint8_t *u = alloc_umad(MAD_LEN);
	int len = MAD_LEN;
	CHECK(umad_recv(w->a, u, &len, 0) == -EINVAL, "recv on a closed port = -EINVAL");
	CHECK(umad_poll(w->a, 0) == -EINVAL, "poll on a closed port = -EINVAL");
	free(u);
}

static int run_main(void)
{
	struct world w;
	CHECK(umad_init() == 0, "umad_init");
	test_header_functions();
	test_strings_and_debug();
	test_discovery();
	open_world(&w);
	test_fd(&w);
	test_recv(&w);
	test_recv_blocks(&w);
	test_poll(&w);
	test_poll_threads(&w);
	test_cancel(&w);
	test_status_timeout(&w);
	test_quirks(&w);
	test_smp(&w);
	test_close(&w);
	test_rmpp_enospc();
	CHECK(umad_done() == 0, "umad_done");
	return 0;
}

/* VMAD_SIM_FAULTS="loss=1": every frame is lost; a request times out after its retries. */
static int run_faults(void)
{
	struct world w;
	open_world(&w);
	CHECK(send_get(&w, 0x9009, 20, 2, 2) == 0, "send through a link that loses everything");
	uint8_t *u = alloc_umad(MAD_LEN);
	int len = MAD_LEN;
	CHECK(umad_recv(w.a, u, &len, GUARD_MS) == w.client && umad_status(u) == ETIMEDOUT,
	      "faults: the request times out (status ETIMEDOUT)");
	len = MAD_LEN;
	CHECK(umad_recv(w.b, u, &len, 0) == -EWOULDBLOCK, "faults: nothing reached vmadsim1");
	free(u);
	return 0;
}

/* VMAD_SIM_FAULTS="loss=0.1,dup=0.05,reorder=0.1,seed=7": requests with retries all get
 * exactly one answer (lost attempts are retried, duplicates and stale answers dropped). */
static volatile int serving = 1;

static void *serve(void *arg)
{
	struct world *w = arg;
	uint8_t *u = alloc_umad(MAD_LEN);
	while (serving) {
		int len = MAD_LEN;
		if (umad_recv(w->b, u, &len, 20) != w->server)
			continue;
		((uint8_t *)umad_get_mad(u))[3] = 0x81;
		umad_send(w->b, w->server, u, MAD_LEN, 0, 0);
	}
	free(u);
	return NULL;
}

static int run_lossy(void)
{
	enum { N = 50 };
	struct world w;
	int answered[N] = { 0 }, timeouts = 0, stray = 0;
	open_world(&w);
	pthread_t t;
	pthread_create(&t, NULL, serve, &w);
	for (int i = 0; i < N; i++)
		if (send_get(&w, 0xa000 + i, LOSSY_MS, 6, 2) != 0)
			timeouts++;
	uint8_t *u = alloc_umad(MAD_LEN);
	for (int got = 0; got < N;) {
		int len = MAD_LEN;
		if (umad_recv(w.a, u, &len, GUARD_MS) != w.client)
			break;
		got++;
		unsigned i = (unsigned)(mad_tid(umad_get_mad(u)) & 0xffffffff) - 0xa000;
		if (i >= N)
			stray++;
		else if (umad_status(u) != 0)
			timeouts++;
		else
			answered[i]++;
	}
	serving = 0;
	pthread_join(t, NULL);
	int once = 0;
	for (int i = 0; i < N; i++)
		once += answered[i] == 1;
	CHECK(once == N && timeouts == 0 && stray == 0,
	      "lossy link: %d of %d requests answered exactly once (timeouts %d, stray %d)", once, N,
	      timeouts, stray);
	int len = MAD_LEN;
	CHECK(umad_recv(w.a, u, &len, 300) == -ETIMEDOUT, "lossy link: no duplicate answer delivered later");
	free(u);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "main";
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!strcmp(mode, "main")) {
		run_main();
	} else if (!strcmp(mode, "faults")) {
		run_faults();
	} else if (!strcmp(mode, "lossy")) {
		run_lossy();
	} else if (!strcmp(mode, "badenv")) {
		errno = 0;
		CHECK(umad_init() == -EINVAL && errno == EINVAL, "VMAD_TRANSPORT=bogus: umad_init = -EINVAL");
		CHECK(umad_open_port("vmadsim0", 1) == -EINVAL, "...and umad_open_port fails too");
	} else if (!strcmp(mode, "verbs")) {
		CHECK(umad_init() == -EOPNOTSUPP, "VMAD_TRANSPORT=verbs without verbs: -EOPNOTSUPP");
		char names[2][UMAD_CA_NAME_LEN];
		CHECK(umad_get_cas_names(names, 2) == -EOPNOTSUPP, "...and no CAs are listed");
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	printf("%s: %d passed, %d failed\n", mode, passed, failed);
	return failed ? 1 : 0;
}
