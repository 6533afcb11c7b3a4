/* scripts/cross-test's multi-threaded workload: 4 threads each write N
 * bytes to /dev/null one at a time (argv[1], default 100). */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static int fd, n = 100;
static void *work(void *arg)
{
	(void)arg;
	char c = 'x';
	for (int i = 0; i < n; i++)
		write(fd, &c, 1);
	return 0;
}
int main(int argc, char **argv)
{
	if (argc > 1)
		n = atoi(argv[1]);
	fd = open("/dev/null", O_WRONLY);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], 0, work, 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], 0);
	return 0;
}
