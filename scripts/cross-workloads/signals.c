/* scripts/cross-test's signal workload: a SIGUSR1 handler run 20 times
 * (kill to itself: 20 kill + 20 rt_sigreturn calls), then a child that
 * kills itself with SIGTERM (its kill returns, then it dies), reaped by the
 * parent. Exit 0 when both went as meant, else 1. Deterministic: no call
 * depends on timing. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile sig_atomic_t got;
static void on_usr1(int sig)
{
	(void)sig;
	got++;
}
int main(void)
{
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_handler = on_usr1;
	sigaction(SIGUSR1, &a, 0);
	for (int i = 0; i < 20; i++)
		kill(getpid(), SIGUSR1);
	pid_t pid = fork();
	if (pid == 0) {
		kill(getpid(), SIGTERM);
		_exit(2);
	}
	int st;
	waitpid(pid, &st, 0);
	return got == 20 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM ? 0 : 1;
}
