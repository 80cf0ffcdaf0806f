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

void
respawn_remember(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    const char *r = getenv("MCPM_RELOADS");

    exe[n > 0 ? n : 0] = '\0';
    reloads = r != NULL ? strtoul(r, NULL, 10) : 0;
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

void
respawn_start(void)
{
    sigset_t none;
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
    pid = fork();
    if (pid == 0) {
        /* only async-signal-safe calls between fork and exec */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
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
    static const int held[] = { SIGUSR2, SIGTERM, SIGINT, SIGUSR1, SIGHUP };
    struct timespec tick = { 0, 10000000 };
    sigset_t mask;
    char n[24];

    snprintf(n, sizeof(n), "%lu", reloads + 1);
    setenv("MCPM_RELOADS", n, 1);
    /* until the new image handles them (main.c unblocks them then), a
     * reload, a stop or a HUP sent meanwhile waits: by default each
     * would end the unit's main process in the middle of its start */
    sigemptyset(&mask);
    for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
        sigaddset(&mask, held[i]);
    }
    sigprocmask(SIG_SETMASK, &mask, NULL);
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
