/*
 * The application's signal handlers and the Go runtime inside it: see sigstack.go.
 */
#include <signal.h>

#include "plugin.h"

int shift_sig_onstack(void)
{
	int changed = 0;

	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sig == SIGKILL || sig == SIGSTOP || (sig > 31 && sig < SIGRTMIN))
			continue; /* not catchable, or glibc's own (SIGCANCEL, SIGSETXID) */
		if (sigaction(sig, NULL, &sa) || (sa.sa_flags & SA_ONSTACK))
			continue;
		if (!(sa.sa_flags & SA_SIGINFO) && (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue; /* no handler runs */
		sa.sa_flags |= SA_ONSTACK;
		if (sigaction(sig, &sa, NULL) == 0)
			changed++;
	}
	return changed;
}
