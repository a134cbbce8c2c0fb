/* io_uring availability is found out at run time: each case runs in a child process whose seccomp
 * filter makes one io_uring system call fail with a chosen errno (as a container runtime, an old
 * kernel or a memlock limit would), and checks what dc_engine_available() answers and that the
 * reason names the cause and the way out. Skips (77) where io_uring or seccomp is unavailable.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "t_helpers.h"

#if defined(__x86_64__)
#define T_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define T_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup    425
#define __NR_io_uring_register 427
#endif

#ifdef T_AUDIT_ARCH
/* Make system call nr fail with err; everything else runs. */
static int deny_syscall(long nr, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, T_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		return -errno;
	return 0;
}

/* In a child: deny nr with err, then the availability must be want with every word of words[]
 * in the reason. Returns 0 (pass), 1 (fail) or T_EXIT_SKIP (no seccomp here). */
static int check_case(long nr, int err, int want, const char *const *words)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return 1;
	if (pid == 0) {
		char why[320];
		int ret, bad = 0;

		if (deny_syscall(nr, err) < 0)
			_exit(T_EXIT_SKIP);
		why[0] = '\0';
		ret = dc_engine_available("io_uring", why, sizeof(why));
		printf("syscall %ld -> %s: available %d: %s\n", nr, strerror(err), ret, why);
		if (ret != want) {
			fprintf(stderr, "want %d got %d\n", want, ret);
			bad = 1;
		}
		for (; *words; words++)
			if (!strstr(why, *words)) {
				fprintf(stderr, "reason lacks '%s': %s\n", *words, why);
				bad = 1;
			}
		/* The answer is cached: a second call gives the same without a new probe. */
		if (dc_engine_available("io_uring", NULL, 0) != ret)
			bad = 1;
		fflush(stdout);
		_exit(bad);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return 1;
	return WEXITSTATUS(status);
}
#endif

int main(void)
{
#ifdef T_AUDIT_ARCH
	static const char *const eperm[] = { "io_uring_setup", "Operation not permitted", "seccomp",
					     "--engine posix", NULL };
	static const char *const enosys[] = { "io_uring_setup", "without io_uring",
					      "--engine posix", NULL };
	static const char *const enomem[] = { "RLIMIT_MEMLOCK", "ulimit -l", "--engine posix",
					      NULL };
	static const char *const old[] = { "5.6", "--engine posix", NULL };
	struct {
		long nr;
		int err, want;
		const char *const *words;
	} cases[] = {
		{ __NR_io_uring_setup, EPERM, -EPERM, eperm },
		{ __NR_io_uring_setup, ENOSYS, -ENOSYS, enosys },
		{ __NR_io_uring_setup, ENOMEM, -ENOMEM, enomem },
		/* A kernel before 5.6 has io_uring but not IORING_REGISTER_PROBE (nor OP_READ). */
		{ __NR_io_uring_register, EINVAL, -EOPNOTSUPP, old },
	};
	char why[320];

	/* The real answer first, in a child too, so that this process's cache stays empty. */
	if (fork() == 0)
		_exit(dc_engine_available("io_uring", why, sizeof(why)) ? T_EXIT_SKIP : 0);
	{
		int status;

		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			printf("skip: io_uring is not available here to begin with\n");
			return T_EXIT_SKIP;
		}
	}
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret = check_case(cases[i].nr, cases[i].err, cases[i].want, cases[i].words);

		if (ret == T_EXIT_SKIP) {
			printf("skip: cannot install a seccomp filter here\n");
			return T_EXIT_SKIP;
		}
		T_CHECK(ret == 0, "case %u (syscall %ld, %s)", i, cases[i].nr,
			strerror(cases[i].err));
	}
	return t_exit();
#else
	printf("skip: no seccomp audit arch for this CPU in the test\n");
	return T_EXIT_SKIP;
#endif
}
