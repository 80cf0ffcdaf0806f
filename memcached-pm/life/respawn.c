/*
 * respawn.c: the node starts its own successor (respawn.h).
 */
#include "config.h"

#include "memcached-pm/life/respawn.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/life/sdaemon.h"

static char exe[PATH_MAX];      /* the path, not the file: an upgrade
                                   replaces what is there */
static char **args;             /* the command line, NULL-terminated */
static pid_t child;             /* the last successor started */
static unsigned long reloads;   /* images this pid took the node back in
                                   (MCPM_RELOADS, set for the next) */
static pid_t back_from;         /* the successor this image takes the node
                                   back from (MCPM_TAKE_BACK), or 0 */

void
respawn_remember(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    const char *r = getenv("MCPM_RELOADS"), *b = getenv("MCPM_TAKE_BACK");

    exe[n > 0 ? n : 0] = '\0';
    reloads = r != NULL ? strtoul(r, NULL, 10) : 0;
    back_from = b != NULL ? (pid_t)strtol(b, NULL, 10) : 0;
    unsetenv("MCPM_TAKE_BACK");     /* this image's, not its successors' */
    if ((args = calloc((size_t)argc + 1, sizeof(*args))) == NULL) {
        return;
    }
    for (int i = 0; i < argc; i++) {
        if ((args[i] = strdup(argv[i])) == NULL) {
            respawn_free();
            return;
        }
    }
}

/* The signals a process of the unit holds while it is not yet ready for
 * them (main.c unblocks them once it handles them): a reload, a stop or
 * a HUP sent meanwhile waits, where by default each would end the
 * process in the middle of a takeover. */
static void
held_signals(sigset_t *set)
{
    static const int held[] = { SIGUSR2, SIGTERM, SIGINT, SIGUSR1, SIGHUP };

    sigemptyset(set);
    for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
        sigaddset(set, held[i]);
    }
}

void
respawn_start(void)
{
    sigset_t held;
    pid_t pid;

    if (settings.takeover == NULL) {
        log_error("SIGUSR2: without -o takeover there is no successor to "
                  "start");
        return;
    }
    if (exe[0] == '\0' || args == NULL) {
        log_error("SIGUSR2: this node's binary or command line is not "
                  "known: no successor started");
        return;
    }
    if (child > 0 && waitpid(child, NULL, WNOHANG) == 0) {
        log_error("SIGUSR2: pid %d, started before, is still taking over",
                  (int)child);
        return;
    }
    held_signals(&held);
    pid = fork();
    if (pid == 0) {
        /* only async-signal-safe calls between fork and exec; a stop of
         * the unit reaches the successor too, which then makes the clean
         * stop once it serves rather than die in the takeover */
        sigprocmask(SIG_SETMASK, &held, NULL);
        execv(exe, args);
        _exit(127);
    }
    if (pid < 0) {
        log_error("SIGUSR2: cannot start a successor: %s", strerror(errno));
        return;
    }
    child = pid;
    log_info("SIGUSR2: pid %d started from %s to take over", (int)pid, exe);
}

bool
respawn_returns(pid_t pid)
{
    return pid == child && sdaemon_notifying() && !settings.daemonize;
}

bool
respawn_hands_back(pid_t pred)
{
    return sdaemon_notifying() && getppid() == pred;
}

void
respawn_exec(void)
{
    struct timespec tick = { 0, 10000000 };
    sigset_t held;
    char n[24];

    snprintf(n, sizeof(n), "%lu", reloads + 1);
    setenv("MCPM_RELOADS", n, 1);
    snprintf(n, sizeof(n), "%d", (int)child);
    setenv("MCPM_TAKE_BACK", n, 1);
    held_signals(&held);
    sigprocmask(SIG_SETMASK, &held, NULL);
    /* an upgrade renames the new binary into place: the path is either
     * build, but for a moment it may be neither */
    for (int i = 0; i < 100; i++) {
        execv(exe, args);
        if (errno != ENOENT && errno != ETXTBSY) {
            break;
        }
        nanosleep(&tick, NULL);
    }
    log_error("cannot start %s again: %s", exe, strerror(errno));
}

int
respawn_not_back(void)
{
    int status = 0;
    pid_t pid;

    if (back_from <= 0) {
        return 0;
    }
    /* it is going: no node listens on the socket any more, or it refused
     * and has gone (the unit's stop timeout bounds a hang) */
    while ((pid = waitpid(back_from, &status, 0)) < 0 && errno == EINTR) {
    }
    if (pid == back_from && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        /* it stopped as told: the unit is being stopped (systemd sends
         * its signal to every process of the unit), and it made the
         * clean stop */
        log_info("pid %d made the clean stop before it handed the node "
                 "back: nothing to serve", (int)back_from);
        return RESPAWN_STOPPED;
    }
    log_error("pid %d ended before it handed the node back: this start "
              "fails, for the service manager to start the unit again",
              (int)back_from);
    return EX_TEMPFAIL;
}

unsigned long
respawn_reloads(void)
{
    return reloads;
}

void
respawn_reap(void)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (WIFSIGNALED(status)) {
            log_error("pid %d, a successor, was killed by signal %d",
                      (int)pid, WTERMSIG(status));
        } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
            log_error("pid %d, a successor, exited with status %d",
                      (int)pid, WEXITSTATUS(status));
        }
    }
}

void
respawn_free(void)
{
    for (size_t i = 0; args != NULL && args[i] != NULL; i++) {
        free(args[i]);
    }
    free(args);
    args = NULL;
}
