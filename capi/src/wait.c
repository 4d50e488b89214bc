/*
 * umad_recv and umad_poll, the two calls that block, written in C so that they block in
 * poll(2): a cancellation point with only C frames on the stack. OpenSM stops its receiver
 * thread with pthread_cancel + pthread_join while it sits in umad_recv(..., -1); the
 * cancellation's forced unwind must not cross Rust frames (Rust cannot unwind foreign
 * exceptions through its extern "C" functions), and a wait on a Rust condition variable
 * is no cancellation point at all, so the join would never return.
 *
 * The Rust side (hidden symbols, not exported): vmad_capi_recv_nb is umad_recv with a
 * zero timeout (every check, the ENOSPC protocol, errno), vmad_capi_poll_nb is umad_poll
 * with a zero timeout (one turn of the port, then 0, -ETIMEDOUT or -EIO), vmad_capi_get_fd
 * is umad_get_fd. vmad's port descriptor polls readable exactly while a message is queued,
 * or once the port's transport has failed (then both calls return -EIO).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <time.h>

int vmad_capi_recv_nb(int portid, void *umad, int *length);
int vmad_capi_poll_nb(int portid);
int vmad_capi_get_fd(int portid);

/* How long umad_recv drives the port itself before it sleeps in poll(2). */
#define SPIN_US 100

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* poll(fd) for POLLIN until deadline_ms (negative: none): poll's result, EINTR retried. */
static int wait_readable(int fd, long long deadline_ms)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int t = -1;

		if (deadline_ms >= 0) {
			long long left = deadline_ms - now_ms();

			t = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
		}
		int r = poll(&p, 1, t);

		if (r < 0 && errno == EINTR)
			continue;
		return r;
	}
}

int umad_recv(int portid, void *umad, int *length, int timeout_ms)
{
	long long deadline = timeout_ms > 0 ? now_ms() + timeout_ms : -1;

	/*
	 * Each vmad_capi_recv_nb runs one turn of the port on this thread (caller-driven
	 * progress, see vmad's port docs): keep trying for a short bounded spell before
	 * sleeping in poll(), so a reply that is on its way is picked up by the thread that
	 * wants it, with no wake-up in between. Bounded, so cancellation is only delayed.
	 */
	long long spin_until = timeout_ms == 0 ? 0 : now_us() + SPIN_US;

	for (;;) {
		int r = vmad_capi_recv_nb(portid, umad, length);

		if (r != -EWOULDBLOCK || timeout_ms == 0)
			return r;
		if (spin_until && now_us() < spin_until) {
			sched_yield();
			continue;
		}
		spin_until = 0;
		int fd = vmad_capi_get_fd(portid);

		if (fd < 0)
			return fd;
		/* Readable: try again (another thread may have taken the message first). */
		int w = wait_readable(fd, deadline);

		if (w == 0) {
			errno = ETIMEDOUT;
			return -ETIMEDOUT;
		}
		if (w < 0) {
			errno = EIO;
			return -EIO;
		}
	}
}

int umad_poll(int portid, int timeout_ms)
{
	long long deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : -1;

	for (;;) {
		/* Drives the port once, so a zero timeout reports what umad_recv(0) would. */
		int r = vmad_capi_poll_nb(portid);

		if (r != -ETIMEDOUT)
			return r;
		if (timeout_ms == 0)
			return r;
		int fd = vmad_capi_get_fd(portid);

		if (fd < 0)
			return fd;
		int w = wait_readable(fd, deadline);

		if (w == 0) {
			errno = ETIMEDOUT;
			return -ETIMEDOUT;
		}
		if (w < 0) {
			errno = EIO;
			return -EIO;
		}
		/* Readable: a message, or a failed port (vmad_capi_poll_nb tells which). */
	}
}
