/*
 * sys.h: the system calls every request makes (read, sendmsg and the
 * epoll wait), entered directly.
 *
 * glibc's read() and sendmsg() are cancellation points, which cost about
 * 30 instructions a call in a process with threads (transport.h); its
 * syscall() is not one, but it moves all six argument registers for any
 * call and tests the result in a function of its own.  On x86-64 the
 * call here is the `syscall` instruction with its arguments already in
 * place: the kernel takes the number in rax and the arguments in rdi,
 * rsi, rdx, r10, r8 and r9, returns in rax (-errno on failure) and
 * clobbers rcx and r11.  Elsewhere it is syscall().  Either way the
 * result is the libc contract: -1 with errno set on failure.
 */
#ifndef MCPM_SYS_H
#define MCPM_SYS_H

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)

static inline long
sys_result(long r)
{
    if ((unsigned long)r > -4096UL) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static inline long
sys_call3(long n, long a, long b, long c)
{
    long r;

    __asm__ volatile ("syscall"
                      : "=a"(r)
                      : "a"(n), "D"(a), "S"(b), "d"(c)
                      : "rcx", "r11", "memory");
    return sys_result(r);
}

static inline long
sys_call6(long n, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long r;

    __asm__ volatile ("syscall"
                      : "=a"(r)
                      : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
                        "r"(r9)
                      : "rcx", "r11", "memory");
    return sys_result(r);
}

#else

static inline long
sys_call3(long n, long a, long b, long c)
{
    return syscall(n, a, b, c);
}

static inline long
sys_call6(long n, long a, long b, long c, long d, long e, long f)
{
    return syscall(n, a, b, c, d, e, f);
}

#endif

#endif
