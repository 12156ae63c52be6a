/*
 * The interposed C library calls. Each one costs a compare for calls that are not about an
 * emulated device: a path prefix for open/openat, one byte of a table for descriptor calls,
 * a counter for munmap. The real functions come from the next object (RTLD_NEXT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernel.h"
#include "_cgo_export.h"

#define UVERBS_PREFIX "/dev/infiniband/uverbs"
#define MAX_FD 65536

static unsigned char emu_fd[MAX_FD]; /* 1: a command descriptor of an emulated device */
static int emu_maps;                 /* live mappings of emulated UAR pages */

void shift_emu_fd_set(int fd, int on)
{
	if (fd >= 0 && fd < MAX_FD)
		__atomic_store_n(&emu_fd[fd], on, __ATOMIC_RELEASE);
}

static inline int is_emu_fd(int fd)
{
	return fd >= 0 && fd < MAX_FD && __atomic_load_n(&emu_fd[fd], __ATOMIC_ACQUIRE);
}

static inline int is_uverbs(const char *path)
{
	return path && strncmp(path, UVERBS_PREFIX, sizeof(UVERBS_PREFIX) - 1) == 0;
}

/* ret turns the Go side's -errno convention into the C library's. */
static inline long ret(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*ioctl_fn)(int, unsigned long, ...);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);
typedef int (*close_fn)(int);
typedef int (*fstat_fn)(int, struct stat *);

#define REAL(name, type)                                                                           \
	static type real_##name;                                                                   \
	if (!real_##name)                                                                          \
		real_##name = (type)dlsym(RTLD_NEXT, #name)

static int emu_open(const char *path, int flags)
{
	long r = shiftKernelOpen((char *)path, flags);

	return r == SHIFT_EMU_NOT_OURS ? SHIFT_EMU_NOT_OURS : (int)ret(r);
}

/* OPEN is the body of the open family: the mode argument exists only with O_CREAT or
 * O_TMPFILE; an emulated device's path is answered by the Go side, anything else by the C
 * library's function (call, with mode in scope). */
#define OPEN(flags, call)                                                                          \
	do {                                                                                       \
		va_list ap;                                                                        \
		mode_t mode = 0;                                                                   \
		if ((flags) & (O_CREAT | O_TMPFILE)) {                                             \
			va_start(ap, flags);                                                       \
			mode = (mode_t)va_arg(ap, int);                                            \
			va_end(ap);                                                                \
		}                                                                                  \
		if (is_uverbs(path)) {                                                             \
			int r = emu_open(path, flags);                                             \
			if (r != SHIFT_EMU_NOT_OURS)                                               \
				return r;                                                          \
		}                                                                                  \
		return call;                                                                       \
	} while (0)

int open(const char *path, int flags, ...)
{
	REAL(open, open_fn);
	OPEN(flags, real_open(path, flags, mode));
}

int open64(const char *path, int flags, ...)
{
	REAL(open64, open_fn);
	OPEN(flags, real_open64(path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...)
{
	REAL(openat, openat_fn);
	OPEN(flags, real_openat(dirfd, path, flags, mode));
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	REAL(openat64, openat_fn);
	OPEN(flags, real_openat64(dirfd, path, flags, mode));
}

int ioctl(int fd, unsigned long req, ...)
{
	REAL(ioctl, ioctl_fn);
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (is_emu_fd(fd))
		return (int)ret(shiftKernelIoctl(fd, req, arg));
	return real_ioctl(fd, req, arg);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(write, write_fn);

	if (is_emu_fd(fd))
		return ret(shiftKernelWrite(fd, (void *)buf, n));
	return real_write(fd, buf, n);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	REAL(mmap, mmap_fn);

	if (is_emu_fd(fd)) {
		void *p = NULL;
		long r = shiftKernelMmap(fd, off, len, &p);

		if (r < 0) {
			errno = (int)-r;
			return MAP_FAILED;
		}
		__atomic_add_fetch(&emu_maps, 1, __ATOMIC_RELAXED);
		return p;
	}
	return real_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len)
{
	REAL(munmap, munmap_fn);

	if (__atomic_load_n(&emu_maps, __ATOMIC_RELAXED) > 0) {
		long r = shiftKernelMunmap(addr, len);

		if (r != SHIFT_EMU_NOT_OURS) {
			__atomic_sub_fetch(&emu_maps, 1, __ATOMIC_RELAXED);
			return (int)ret(r);
		}
	}
	return real_munmap(addr, len);
}

int close(int fd)
{
	REAL(close, close_fn);

	if (is_emu_fd(fd))
		return (int)ret(shiftKernelClose(fd));
	return real_close(fd);
}

/* libibverbs accepts a command descriptor only if fstat calls it a character device
 * (open_cdev_internal); the emulated one is a socket. The emulated sysfs tree's dev file says
 * 0:0, which makes libibverbs skip the device number check. */
int fstat(int fd, struct stat *st)
{
	REAL(fstat, fstat_fn);
	int r = real_fstat(fd, st);

	if (r == 0 && is_emu_fd(fd)) {
		st->st_mode = (st->st_mode & ~S_IFMT) | S_IFCHR;
		st->st_rdev = 0;
	}
	return r;
}

int fstat64(int fd, struct stat64 *st)
{
	return fstat(fd, (struct stat *)st);
}
