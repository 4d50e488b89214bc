/*
 * C ABI robustness (issue 9): hostile or careless callers of vmad's libibumad.
 * NULL and misaligned pointers, short lengths, closed or never-opened port ids,
 * unregistered agent ids, double close, a header on a read-only page: each returns the documented error and
 * nothing crashes (run under AddressSanitizer). A panic inside Rust becomes an
 * error return: the debug library panics in umad_get_fd when VMAD_TEST_PANIC is
 * "umad_get_fd" (a test hook of debug builds only; no extra export).
 *
 * Built against the SYSTEM <infiniband/umad.h>; embedded fabric vmadsim0/vmadsim1.
 * Prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/umad.h>

#include "check.h"

/* A GMP Get (PerfMgt) at `mad`. */
static void perf_get(uint8_t *mad, uint32_t tid)
{
	memset(mad, 0, 256);
	mad[0] = 1;
	mad[1] = 0x04;
	mad[2] = 1;
	mad[3] = 0x01;
	mad[12] = tid >> 24;
	mad[13] = tid >> 16;
	mad[14] = tid >> 8;
	mad[15] = tid;
}

/* The header getters only read: on a read-only page they return the header's values,
 * where a read-modify-write of the whole header faults. Run in a child, so that a fault
 * is a failed check rather than the end of the test. */
static void check_getters_read_only(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *u = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	umad_set_addr(u, 2, 1, 0, 0x80010000);
	umad_set_pkey(u, 3);
	/* status = ETIMEDOUT, in host order as the kernel writes it */
	memcpy(u + 4, &(uint32_t){ ETIMEDOUT }, 4);
	CHECK(mprotect(u, page, PROT_READ) == 0, "mprotect(PROT_READ)");
	pid_t child = fork();
	if (child == 0) {
		int ok = umad_status(u) == ETIMEDOUT && umad_get_pkey(u) == 3 &&
			 umad_get_mad_addr(u) == (void *)(u + 20) &&
			 umad_get_mad_addr(u)->lid == htobe16(2);
		_exit(ok ? 0 : 1);
	}
	int st = 0;
	CHECK(child > 0 && waitpid(child, &st, 0) == child, "fork and wait");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "status/get_pkey/get_mad_addr on a read-only header: right values, no fault (%s %d)",
	      WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	munmap(u, page);
}

int main(void)
{
	int r, len;
	long mask[16 / sizeof(long)] = { 0 };

	CHECK(umad_init() == 0, "umad_init");

	/* NULL pointers. */
	errno = 0;
	r = umad_send(1, 0, NULL, 256, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "send(NULL buffer): -EIO, errno EINVAL (got %d, %d)", r, errno);
	len = 256;
	CHECK(umad_recv(1, NULL, &len, 0) == -EINVAL, "recv(NULL buffer): -EINVAL");
	CHECK(umad_status(NULL) == -EINVAL, "status(NULL): -EINVAL");
	CHECK(umad_get_mad(NULL) == NULL, "get_mad(NULL): NULL");
	CHECK(umad_get_mad_addr(NULL) == NULL, "get_mad_addr(NULL): NULL");
	CHECK(umad_set_addr(NULL, 1, 1, 0, 0x80010000) == -EINVAL, "set_addr(NULL): -EINVAL");
	CHECK(umad_set_pkey(NULL, 0) == -EINVAL, "set_pkey(NULL): -EINVAL");
	CHECK(umad_get_pkey(NULL) == -EINVAL, "get_pkey(NULL): -EINVAL");
	CHECK(umad_register2(1, NULL, NULL) == EINVAL, "register2(NULL attr): EINVAL (positive)");
	check_getters_read_only();

	int a = umad_open_port("vmadsim0", 1);
	int b = umad_open_port("vmadsim1", 1);
	CHECK(a >= 0 && b >= 0, "open both ports (%d, %d)", a, b);
	void *buf = calloc(1, umad_size() + 256 + 1);
	len = 256;
	CHECK(umad_recv(a, buf, NULL, 0) == -EINVAL, "recv(NULL length): -EINVAL");
	CHECK(umad_register_oui(a, 0x30, 0, NULL, mask) == -EINVAL, "register_oui(NULL oui): -EINVAL");

	/* Short and negative lengths. */
	len = 255;
	CHECK(umad_recv(a, buf, &len, 0) == -EINVAL, "recv(*length 255): -EINVAL");
	len = -1;
	CHECK(umad_recv(a, buf, &len, 0) == -EINVAL, "recv(*length -1): -EINVAL");
	int client = umad_register(a, 0x04, 1, 0, NULL);
	CHECK(client >= 0, "register PerfMgt client (%d)", client);
	perf_get(umad_get_mad(buf), 1);
	umad_set_addr(buf, 2, 1, 0, 0x80010000);
	errno = 0;
	r = umad_send(a, client, buf, 20, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "send(20-byte MAD): -EIO, errno EINVAL (got %d, %d)", r, errno);
	errno = 0;
	r = umad_send(a, client, buf, -5, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "send(negative length): -EIO, errno EINVAL");
	uint8_t *big = calloc(1, umad_size() + 512);
	memcpy(big, buf, umad_size() + 256);
	errno = 0;
	r = umad_send(a, client, big, 512, 0, 0);
	CHECK(r == -EIO && errno == EMSGSIZE, "send(512 bytes, no RMPP): -EIO, errno EMSGSIZE (got %d)", errno);
	free(big);

	/* Misaligned buffers work (every access is unaligned-safe). */
	uint8_t *raw = calloc(1, umad_size() + 256 + 8);
	void *odd = raw + 3;
	CHECK(umad_set_addr(odd, 2, 1, 0, 0x80010000) == 0, "set_addr on a misaligned buffer");
	CHECK(umad_set_pkey(odd, 0) == 0 && umad_get_pkey(odd) == 0, "P_Key index on a misaligned buffer");
	CHECK(umad_status(odd) == 0, "status on a misaligned buffer");
	mask[0] = 1 << 1;
	int server = umad_register(b, 0x04, 1, 0, mask);
	CHECK(server >= 0, "register PerfMgt server on b");
	perf_get(umad_get_mad(odd), 2);
	CHECK(umad_send(a, client, odd, 256, 0, 0) == 0, "send from a misaligned buffer");
	uint8_t *raw2 = calloc(1, umad_size() + 256 + 8);
	void *odd2 = raw2 + 5;
	len = 256;
	r = umad_recv(b, odd2, &len, 5000);
	CHECK(r == server && len == 256 && ((uint8_t *)umad_get_mad(odd2))[15] == 2,
	      "recv into a misaligned buffer (%d, %d)", r, len);
	int *odd_len = (int *)((uint8_t *)raw2 + 1); /* an int at an odd address */
	memcpy(odd_len, &(int){ 256 }, sizeof(int));
	CHECK(umad_recv(b, odd2, odd_len, 0) == -EWOULDBLOCK, "recv with a misaligned *length: -EWOULDBLOCK");

	/* Unregistered agent ids. */
	errno = 0;
	r = umad_send(a, 31, buf, 256, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "send(unregistered agent 31): -EIO, errno EINVAL");
	errno = 0;
	r = umad_send(a, -3, buf, 256, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "send(agent -3): -EIO, errno EINVAL");
	errno = 0;
	CHECK(umad_unregister(a, 17) == -1 && errno == EINVAL, "unregister(never registered): -1, EINVAL");
	CHECK(umad_unregister(a, client) == 0, "unregister(client)");
	errno = 0;
	CHECK(umad_unregister(a, client) == -1 && errno == EINVAL, "unregister twice: -1, EINVAL");
	errno = 0;
	r = umad_send(a, client, buf, 256, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "send on an unregistered agent: -EIO, errno EINVAL");

	/* Never-opened and closed port ids. */
	int ids[] = { 9999, -1, 0x7fffffff };
	for (unsigned i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		int id = ids[i];
		len = 256;
		CHECK(umad_recv(id, buf, &len, 0) == -EINVAL, "recv(port %d): -EINVAL", id);
		CHECK(umad_poll(id, 0) == -EINVAL, "poll(port %d): -EINVAL", id);
		CHECK(umad_get_fd(id) == -EINVAL, "get_fd(port %d): -EINVAL", id);
		errno = 0;
		CHECK(umad_register(id, 0x04, 1, 0, NULL) == -EPERM && errno == EINVAL,
		      "register(port %d): -EPERM, errno EINVAL", id);
		CHECK(umad_close_port(id) == -EINVAL, "close(port %d): -EINVAL", id);
	}
	CHECK(umad_close_port(b) == 0, "close b");
	CHECK(umad_close_port(b) == -EINVAL, "double close: -EINVAL");
	len = 256;
	CHECK(umad_recv(b, buf, &len, 100) == -EINVAL, "recv on a closed port: -EINVAL");
	errno = 0;
	r = umad_send(b, server, buf, 256, 0, 0);
	CHECK(r == -EIO && errno == EINVAL, "send on a closed port: -EIO, errno EINVAL");
	CHECK(umad_unregister(b, server) == -1, "unregister on a closed port: -1");

	/* A panic inside Rust is an error return, and the library keeps working. */
	setenv("VMAD_TEST_PANIC", "umad_get_fd", 1);
	errno = 0;
	r = umad_get_fd(a);
	CHECK(r == -EIO && errno == EIO, "a panic in umad_get_fd: -EIO, errno EIO (got %d, %d)", r, errno);
	unsetenv("VMAD_TEST_PANIC");
	CHECK(umad_get_fd(a) >= 0, "umad_get_fd works again after the panic");
	CHECK(umad_close_port(a) == 0, "close a");

	free(raw);
	free(raw2);
	free(buf);
	umad_done();
	printf("robust: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
