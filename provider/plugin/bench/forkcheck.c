/*
 * forkcheck: fork without exec in a process using libmlx5-shift.
 *
 *   forkcheck -d DEV -D PEER
 *
 * Two connected QPs of this process carry WRITEs; the process forks. The child, which has no
 * Go runtime (fork copies only the calling thread), must get an error from every verb it
 * tries (EPERM from post_send, a negative count from poll_cq) rather than hang, must find
 * its copy of an ordinary buffer intact, and exit at once. The parent, meanwhile and after,
 * must carry on: its WRITEs still complete and land. Run with RDMAV_FORK_SAFE=1 (libibverbs
 * then marks registered memory MADV_DONTFORK as well; the plugin's rings always are).
 * Prints "forkcheck: ok" and exits 0, or names what failed and exits 1.
 */
#include "end.h" /* first: it defines _GNU_SOURCE */

#include <signal.h>
#include <sys/wait.h>

static void writes(struct end *a, struct end *b, int n, char fill)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf, .length = 256, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_wc wc;
	double start;
	int err, got = 0, r;

	memset(a->buf, fill, 256);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)b->buf;
	wr.wr.rdma.rkey = b->mr->rkey;
	for (int i = 0; i < n; i++) {
		wr.send_flags = IBV_SEND_SIGNALED;
		if ((err = ibv_post_send(a->qp, &wr, &bad)))
			die("parent ibv_post_send", err);
	}
	for (start = now_ns(); got < n;) {
		if ((r = ibv_poll_cq(a->cq, 1, &wc)) < 0 || (r == 1 && wc.status != IBV_WC_SUCCESS))
			die("parent completion", EIO);
		got += r;
		if (now_ns() - start > 30e9)
			die("parent completions within 30 s", ETIMEDOUT);
	}
	for (int i = 0; i < 256; i++)
		if (b->buf[i] != fill)
			die("parent WRITE did not land", EIO);
}

static int child(struct end *a, const char *plain)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf, .length = 8, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE }, *bad;
	struct ibv_wc wc;
	int err;

	alarm(10); /* a hang is the failure this guards against: SIGALRM ends the child */
	if ((err = ibv_post_send(a->qp, &wr, &bad)) != EPERM) {
		fprintf(stderr, "forkcheck: child ibv_post_send returned %d, want EPERM\n", err);
		return 1;
	}
	if (ibv_poll_cq(a->cq, 1, &wc) >= 0) {
		fprintf(stderr, "forkcheck: child ibv_poll_cq succeeded, want an error\n");
		return 1;
	}
	if (strcmp(plain, "intact") != 0) {
		fprintf(stderr, "forkcheck: child's copy of an ordinary buffer is %.8s\n", plain);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *peer = NULL;
	struct end a = { 0 }, b = { 0 };
	char *plain = strdup("intact");
	int status;
	pid_t pid;

	dev_args(argc, argv, &dev, &peer);
	setup(&a, dev, 64);
	setup(&b, peer, 64);
	connect_qp(a.qp, b.qp, &b.gid);
	connect_qp(b.qp, a.qp, &a.gid);
	writes(&a, &b, 16, 0x11);

	fflush(NULL);
	if ((pid = fork()) < 0)
		die("fork", errno);
	if (pid == 0)
		_exit(child(&a, plain));
	writes(&a, &b, 16, 0x22); /* while the child runs */
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid", errno);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "forkcheck: child %s %d\n", WIFSIGNALED(status) ? "killed by signal" : "exited",
			WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		return 1;
	}
	writes(&a, &b, 16, 0x33); /* and after */
	printf("forkcheck: ok\n");
	return 0;
}
