/*
 * portfile.c: see portfile.h.
 */
#include "memcached-pm/net/portfile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static FILE *lck;
static char *lck_name;

void
portfile_open(void)
{
    const char *name = getenv("MEMCACHED_PORT_FILENAME");
    size_t len;

    if (name == NULL) {
        return;
    }
    len = strlen(name) + sizeof(".lck");
    if ((lck_name = malloc(len)) == NULL) {
        return;
    }
    snprintf(lck_name, len, "%s.lck", name);
    if ((lck = fopen(lck_name, "a")) == NULL) {
        fprintf(stderr, "Failed to open \"%s\": %s\n", lck_name,
                strerror(errno));
        free(lck_name);
        lck_name = NULL;
    }
}

void
portfile_note(int fd, bool udp)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    const char *transport = udp ? "UDP" : "TCP";

    if (lck == NULL ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        return;
    }
    if (ss.ss_family == AF_INET) {
        fprintf(lck, "%s INET: %u\n", transport,
                ntohs(((struct sockaddr_in *)&ss)->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        fprintf(lck, "%s INET6: %u\n", transport,
                ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    }
}

void
portfile_close(void)
{
    const char *name = getenv("MEMCACHED_PORT_FILENAME");

    if (lck == NULL) {
        return;
    }
    fclose(lck);
    lck = NULL;
    if (rename(lck_name, name) != 0) {
        fprintf(stderr, "Failed to rename \"%s\": %s\n", lck_name,
                strerror(errno));
    }
    free(lck_name);
    lck_name = NULL;
}

int
portfile_bind_port(int setting)
{
    return setting == -1 ? 0 : setting;
}
