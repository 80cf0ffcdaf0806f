/*
 * respawn.h: SIGUSR2 starts the node's successor (respawn.c): the binary
 * at the path this one was started from (an upgrade puts the new build
 * there) with this node's command line, which takes the node over on
 * -o takeover's socket (takeover.h).  Under systemd that is `systemctl
 * reload` (ExecReload=/bin/kill -USR2 $MAINPID): a restart or an upgrade
 * inside the unit, its connections passed to the successor ahead of the
 * pause, none through the fd store, the old node naming the new one the
 * unit's MAINPID= before it exits.
 */
#ifndef MCPM_RESPAWN_H
#define MCPM_RESPAWN_H

/* At the very start, before the options are parsed: the binary's path
 * and the command line, as given. */
void respawn_remember(int argc, char **argv);

/* SIGUSR2: start the successor (one at a time), or say why not. */
void respawn_start(void);

/* Free what respawn_remember() kept. */
void respawn_free(void);

#endif
