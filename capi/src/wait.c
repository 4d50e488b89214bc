/*
 * umad_recv and umad_poll, the two calls that block, written in C so that they block in
 * poll(2): a cancellation point with only C frames on the stack. OpenSM stops its receiver
 * thread with pthread_cancel + pthread_join while it sits in umad_recv(..., -1); the
 * cancellation's forced unwind must not cross Rust frames (Rust cannot unwind foreign
 * exceptions through its extern "C" functions), and a wait on a Rust condition variable
 * is no cancellation point at all, so the join would never return.
 *
 * The Rust side (hidden symbols, not exported): vmad_capi_recv_nb is umad_recv with a
 * zero timeout (every check, the ENOSPC protocol, errno; it runs one turn of the port),
 * vmad_capi_recv_before_wait is the same for a caller about to poll (its turn does not
 * read a transport that has a descriptor of its own: the poll says whether a read would
 * find anything), vmad_capi_poll_nb is umad_poll with a zero timeout (one turn of the port, then 0,
 * -ETIMEDOUT or -EIO). vmad_capi_wait_begin gives the descriptors to poll: the open's,
 * which polls readable exactly while a message is queued (or once the port's transport
 * has failed: then both calls return -EIO), and the transport's own where it has one
 * (ibsim's socket, the kernel's umad device), so that a MAD wakes this thread and it runs
 * the turn itself, with no other thread in between; while the wait lasts the port counts
 * this thread as reading the transport (vmad_capi_wait_end ends it, from a cancellation
 * cleanup handler too). vmad_capi_spin_us is the port's caller spin.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

int vmad_capi_recv_nb(int portid, void *umad, int *length);
int vmad_capi_recv_before_wait(int portid, void *umad, int *length);
int vmad_capi_poll_nb(int portid);
void *vmad_capi_wait_begin(int portid, int fds[2]);
void vmad_capi_wait_end(void *token);
int vmad_capi_spin_us(int portid);
void vmad_capi_waited(int portid, long us);

/*
 * Cancellation off while Rust runs (boundary.rs's guard calls these around every entry
 * point's body): a cancellation point reached inside Rust (a read, write or sendto of a
 * turn, the verbs doorbell) would otherwise start a forced unwind through Rust frames,
 * which Rust cannot unwind (glibc aborts: "exception not rethrown"). A cancel that comes
 * meanwhile stays pending, and acts at the caller's next cancellation point: for a
 * blocked umad_recv/umad_poll, the poll() below.
 */
__attribute__((visibility("hidden"))) int vmad_capi_cancel_off(void)
{
	int old = PTHREAD_CANCEL_ENABLE;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

__attribute__((visibility("hidden"))) void vmad_capi_cancel_restore(int old)
{
	int ignored;

	pthread_setcancelstate(old, &ignored);
}

/* A yield that kept us off the CPU this long: other threads want the core, stop spinning. */
#define YIELD_LOADED_US 50

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

/* poll(fds) for POLLIN until deadline_ms (negative: none): poll's result, EINTR retried;
 * 0 at once once the deadline has passed (a descriptor that stays readable while nothing
 * comes for this open, such as another open's stream of MADs, would otherwise keep the
 * callers' loops from ever timing out). fds[1] < 0: only fds[0]. */
static int wait_readable(const int fds[2], long long deadline_ms, long long now_hint_ms)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = fds[0], .events = POLLIN },
			{ .fd = fds[1], .events = POLLIN },
		};
		int t = -1;

		if (deadline_ms >= 0) {
			long long left = deadline_ms - (now_hint_ms >= 0 ? now_hint_ms : now_ms());

			now_hint_ms = -1;

			if (left <= 0)
				return 0;
			t = left > INT_MAX ? INT_MAX : (int)left;
		}
		int r = poll(p, fds[1] < 0 ? 1 : 2, t);

		if (r < 0 && errno == EINTR)
			continue;
		return r;
	}
}

static void end_wait(void *token)
{
	vmad_capi_wait_end(token);
}

/*
 * Sleep until the port may have something for this open: 1, or 0 at deadline_ms, or
 * -errno (-EINVAL: the port is not open; -EIO: poll failed). now_hint_ms: the clock as
 * just read (negative: read it).
 */
static int wait_port(int portid, long long deadline_ms, long long now_hint_ms)
{
	int fds[2];
	int r;
	void *token = vmad_capi_wait_begin(portid, fds);

	if (!token)
		return errno ? -errno : -EINVAL;
	pthread_cleanup_push(end_wait, token);
	r = wait_readable(fds, deadline_ms, now_hint_ms);
	pthread_cleanup_pop(1);
	if (r < 0)
		return -EIO;
	return r > 0;
}

int umad_recv(int portid, void *umad, int *length, int timeout_ms)
{
	/*
	 * Counted from the first attempt that found nothing (a turn later than the call:
	 * microseconds): the clock is read only once the call must wait, and only when a
	 * deadline or the spin policy needs it (a clock read is a system call where the clock
	 * source has no vDSO, as in the rxe VM).
	 */
	long long deadline = -1, now_hint = -1;
	int started = 0, report = 0;

	/*
	 * Each vmad_capi_recv_nb runs one turn of the port on this thread (caller-driven
	 * progress, see vmad's port docs): keep trying for the port's short caller spin before
	 * sleeping in poll(), so a reply that is on its way is picked up by the thread that
	 * wants it without sleeping. Bounded, so cancellation is only delayed. The port's
	 * policy says how long (nothing while its recent waits were longer than a spin), and
	 * each wait is reported to it.
	 */
	long long empty_since = 0, spin_until = -1;
	/*
	 * Whether this attempt reads the transport. Not before a poll(2) of the transport's
	 * descriptor (which tells whether a read would find anything), only right after it
	 * turned readable, and while spinning; always with a zero timeout.
	 */
	int read = timeout_ms == 0;

	for (;;) {
		int r = read ? vmad_capi_recv_nb(portid, umad, length)
			     : vmad_capi_recv_before_wait(portid, umad, length);

		read = 0;

		if (r != -EWOULDBLOCK || timeout_ms == 0) {
			if (report && r >= 0)
				vmad_capi_waited(portid, (long)(now_us() - empty_since));
			return r;
		}
		if (!started) {
			/* -1: this port's callers never spin, so the wait is not reported. */
			int spin_us = vmad_capi_spin_us(portid);

			started = 1;
			report = spin_us >= 0;
			if (report || timeout_ms > 0) {
				empty_since = now_us();
				now_hint = empty_since / 1000;
			}
			if (timeout_ms > 0)
				deadline = now_hint + timeout_ms;
			spin_until = spin_us > 0 ? empty_since + spin_us : 0;
		}
		if (spin_until && now_us() < spin_until) {
			long long before = now_us();

			sched_yield();
			if (now_us() - before >= YIELD_LOADED_US)
				spin_until = 0;
			now_hint = -1;
			read = 1;
			continue;
		}
		spin_until = 0;
		/* Readable: try again (another thread may have taken the message first). */
		int w = wait_port(portid, deadline, now_hint);

		now_hint = -1;

		if (w == 0) {
			errno = ETIMEDOUT;
			return -ETIMEDOUT;
		}
		if (w < 0) {
			errno = -w;
			return w;
		}
		read = 1;
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
		int w = wait_port(portid, deadline, -1);

		if (w == 0) {
			errno = ETIMEDOUT;
			return -ETIMEDOUT;
		}
		if (w < 0) {
			errno = -w;
			return w;
		}
		/* Readable: a message, or a failed port (vmad_capi_poll_nb tells which). */
	}
}
