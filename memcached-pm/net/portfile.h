/*
 * portfile.h: the ports memcached-pm listens on, written where a test
 * harness can read them.
 *
 * With MEMCACHED_PORT_FILENAME=<file> in the environment, each TCP and
 * UDP socket bound to an IP address adds a line to <file>.lck ("TCP
 * INET: 40123", "UDP INET6: 40124"), and once every socket is bound the
 * file is renamed to <file>: a harness that starts the server at -p -1
 * (a port the kernel picks) waits for the file, then reads its ports.
 * The format and the .lck step are memcached's.
 */
#ifndef MCPM_PORTFILE_H
#define MCPM_PORTFILE_H

#include <stdbool.h>

/* Start the .lck file, if the environment asks for one. */
void portfile_open(void);

/* Note socket fd's bound port (a UDP one if udp); other families
 * (unix sockets) are not written. */
void portfile_note(int fd, bool udp);

/* Every socket is bound: put the file in place. */
void portfile_close(void);

/* The port to bind for a -p or -U value: -1 means any (the kernel's
 * choice), as memcached takes it. */
int portfile_bind_port(int setting);

#endif
