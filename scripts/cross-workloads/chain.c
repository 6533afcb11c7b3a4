/* scripts/cross-test's fork+exec chain: `chain N` forks, the child execs
 * `chain N-1`, the parent waits; the exit status is N (each level adds 1),
 * so N+1 execve calls and N+1 processes in all. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	if (n <= 0)
		return 0;
	char next[16];
	snprintf(next, sizeof next, "%d", n - 1);
	pid_t pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", argv[0], next, (char *)0);
		_exit(99);
	}
	int st;
	waitpid(pid, &st, 0);
	return WEXITSTATUS(st) + 1;
}
