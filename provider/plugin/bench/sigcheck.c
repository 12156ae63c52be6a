/*
 * sigcheck: an application's signal handler installed without SA_ONSTACK (perftest's
 * signal(SIGALRM, catch_alarm) for -D) in a process using libmlx5-shift.
 *
 *   sigcheck -d DEV -D PEER
 *
 * The handler runs on whatever stack the interrupted thread was on: with the plugin's data
 * path in Go that is often a goroutine's stack, which is small and has Go memory right below
 * it. A timer delivers SIGALRM every 20 µs while two connected QPs carry WRITEs through the
 * plugin (ibv_post_send and ibv_poll_cq enter Go in SHIFT mode); the handler uses a frame of
 * the size perftest's does, plus the signal frame the kernel pushes. The timer starts once
 * the plugin has given the handler SA_ONSTACK (internal/cshared), as perftest's first alarm comes
 * a second or more after its signal(). Prints "sigcheck: ok" with the signals delivered and
 * exits 0, or crashes.
 */
#include "end.h" /* first: it defines _GNU_SOURCE */

#include <signal.h>
#include <sys/time.h>

static volatile sig_atomic_t hits;

static void on_alarm(int sig)
{
	volatile char frame[512]; /* a handler's locals and the libc calls it makes */

	frame[0] = (char)sig;
	frame[sizeof(frame) - 1] = frame[0];
	hits++;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *peer = NULL;
	struct end a = { 0 }, b = { 0 };
	struct itimerval it = { { 0, 20 }, { 0, 20 } }, off = { 0 };
	struct ibv_sge sge;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc[16];
	const long n = 200000;
	long posted = 0, done = 0;
	double start;
	int err, r;

	dev_args(argc, argv, &dev, &peer);
	setup(&a, dev, 64);
	setup(&b, peer, 64);
	connect_qp(a.qp, b.qp, &b.gid);
	connect_qp(b.qp, a.qp, &a.gid);
	if (signal(SIGALRM, on_alarm) == SIG_ERR) /* no SA_ONSTACK, as signal() installs it */
		die("signal", errno);
	for (start = now_ns();;) {
		struct sigaction sa;

		if (sigaction(SIGALRM, NULL, &sa))
			die("sigaction", errno);
		if (sa.sa_flags & SA_ONSTACK)
			break;
		if (now_ns() - start > 5e9) {
			fprintf(stderr, "sigcheck: the handler did not get SA_ONSTACK within 5 s\n");
			break; /* the stress below shows what that costs */
		}
		usleep(1000);
	}
	if (setitimer(ITIMER_REAL, &it, NULL))
		die("setitimer", errno);
	sge = (struct ibv_sge){ .addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey;
	for (start = now_ns(); done < n;) {
		while (posted < n && posted - done < 32) {
			if ((err = ibv_post_send(a.qp, &wr, &bad)))
				die("ibv_post_send", err);
			posted++;
		}
		if ((r = ibv_poll_cq(a.cq, 16, wc)) < 0)
			die("ibv_poll_cq", EIO);
		for (int i = 0; i < r; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				die("completion", EIO);
		done += r;
		if (now_ns() - start > 120e9)
			die("completions within 120 s", ETIMEDOUT);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	printf("sigcheck: ok, %ld WRITEs, %d signals\n", n, (int)hits);
	return 0;
}
