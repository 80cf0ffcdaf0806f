/*
 * respawn.h: SIGUSR2 starts the node's successor (respawn.c): the binary
 * at the path this one was started from (an upgrade puts the new build
 * there) with this node's command line, which takes the node over on
 * -o takeover's socket (takeover.h).  Under systemd that is `systemctl
 * reload` (ExecReload=/bin/kill -USR2 $MAINPID): a restart or an upgrade
 * inside the unit, its connections passed to the successor ahead of the
 * pause, none through the fd store.  systemd supervises only its own
 * child (a main process named by MAINPID= that is not is "alien": a stop
 * kills it at once, and its exit goes unseen), so there the successor
 * serves only for a moment: once it does, the unit's main process
 * becomes the binary now installed (execv, the same pid) and takes the
 * node back from it, a second takeover, and reaps it.
 */
#ifndef MCPM_RESPAWN_H
#define MCPM_RESPAWN_H

#include <stdbool.h>
#include <sys/types.h>

/* At the very start, before the options are parsed: the binary's path
 * and the command line, as given. */
void respawn_remember(int argc, char **argv);

/* SIGUSR2: start the successor (one at a time), or say why not. */
void respawn_start(void);

/* Is pid, which takes this node over, the successor it started for the
 * unit it is the main process of (NOTIFY_SOCKET, no -d)?  Then it hands
 * the node back to respawn_exec()'s image and this pid stays the unit's. */
bool respawn_returns(pid_t pid);

/* The other side: is this process the successor pred started so, which
 * hands the node back to pred's next image and names itself nothing? */
bool respawn_hands_back(pid_t pred);

/* After handing the node to such a successor, everything freed: become
 * the binary at the path this one was started from, with the same
 * command line.  Returns only if that cannot be done (logged). */
void respawn_exec(void);

/* In the image respawn_exec() started, when its successor did not hand
 * the node back: 0 if this is no such image; RESPAWN_STOPPED if the
 * successor made a clean stop meanwhile (a stop of the unit reaches every
 * process in it: exit 0 without serving); else EX_TEMPFAIL, after a
 * message (the successor crashed: the unit's Restart= starts it afresh,
 * with its sockets). */
#define RESPAWN_STOPPED (-1)
int respawn_not_back(void);

/* How many reloads this pid has taken the node back in (its images
 * count them for one another through MCPM_RELOADS): the unit's status
 * says it, so that `systemctl show -P StatusText` tells when a reload
 * has ended. */
unsigned long respawn_reloads(void);

/* SIGCHLD: collect successors that have exited (logging a bad end). */
void respawn_reap(void);

/* Free what respawn_remember() kept. */
void respawn_free(void);

#endif
