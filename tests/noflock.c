/* LD_PRELOAD shim for the tests: lock calls on files under $NOFLOCK_DIR (every file when it is
 * unset) fail with ENOSYS, as on a Lustre client mounted -o noflock. Other calls go through.
 * Built by the tests: cc -shared -fPIC -o noflock.so noflock.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static int refused(int fd)
{
    const char *dir = getenv("NOFLOCK_DIR");
    char link[64], path[4096];
    ssize_t length;

    if (dir == NULL || *dir == '\0')
        return 1;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    length = readlink(link, path, sizeof path - 1);
    if (length < 0)
        return 0;
    path[length] = '\0';
    return strncmp(path, dir, strlen(dir)) == 0;
}

static int is_lock(int command)
{
    return command == F_SETLK || command == F_SETLKW || command == F_GETLK ||
           command == F_OFD_SETLK || command == F_OFD_SETLKW || command == F_OFD_GETLK;
}

static int lock_or_forward(const char *name, int fd, int command, void *argument)
{
    int (*real)(int, int, ...) = (int (*)(int, int, ...))dlsym(RTLD_NEXT, name);

    if (is_lock(command) && refused(fd)) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd, command, argument);
}

/* The argument is an int or a pointer: read as a pointer, it is passed on unchanged (x86-64). */
#define ARGUMENT(last, argument) do { va_list list; va_start(list, last); \
        argument = va_arg(list, void *); va_end(list); } while (0)

int fcntl(int fd, int command, ...)
{
    void *argument;

    ARGUMENT(command, argument);
    return lock_or_forward("fcntl", fd, command, argument);
}

int fcntl64(int fd, int command, ...)
{
    void *argument;

    ARGUMENT(command, argument);
    return lock_or_forward("fcntl64", fd, command, argument);
}

int flock(int fd, int operation)
{
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");

    if (refused(fd)) {
        errno = ENOSYS;
        return -1;
    }
    return real(fd, operation);
}
