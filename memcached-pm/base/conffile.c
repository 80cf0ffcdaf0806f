/*
 * conffile.c: options from a file laid out as Debian's /etc/memcached.conf
 * (conffile.h).
 */
#include "memcached-pm/base/conffile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONF_ARGS_MAX 64        /* words a line may hold */

static const char long_name[] = "--config-file";

const char *
conffile_path(int argc, char **argv)
{
    size_t n = sizeof(long_name) - 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
        if (strncmp(argv[i], long_name, n) == 0 && argv[i][n] == '=') {
            return argv[i] + n + 1;
        }
        if (strcmp(argv[i], long_name) == 0) {
            return i + 1 < argc ? argv[i + 1] : NULL;
        }
    }
    return NULL;
}

/* The line without its comment (from a '#' not after a backslash; "\#"
 * stands for '#') and the blanks around it, in place. */
static char *
strip(char *line)
{
    char *out = line, *end;

    for (char *p = line; *p != '\0'; p++) {
        if (p[0] == '\\' && p[1] == '#') {
            *out++ = *++p;
        } else if (*p == '#') {
            break;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
    while (*line == ' ' || *line == '\t') {
        line++;
    }
    end = line + strlen(line);
    while (end > line && strchr(" \t\r\n", end[-1]) != NULL) {
        *--end = '\0';
    }
    return line;
}

/* Is a stripped line one the file may hold that is not for us?  -d and
 * -h (the service manager runs the server in the foreground; help has
 * no place in a service), and `logfile` (the journal keeps the log), as
 * Debian's own start script reads the file. */
static bool
skipped(const char *line)
{
    return strncmp(line, "-d", 2) == 0 || strncmp(line, "-h", 2) == 0 ||
           strncmp(line, "logfile ", 8) == 0 ||
           strncmp(line, "logfile\t", 8) == 0;
}

/* One line's words after argv[0]; -1 when there are too many. */
static int
split(char *line, char *prog, char **words)
{
    int n = 0;

    words[n++] = prog;
    for (char *w = strtok(line, " \t"); w != NULL; w = strtok(NULL, " \t")) {
        if (n == CONF_ARGS_MAX) {
            return -1;
        }
        words[n++] = w;
    }
    words[n] = NULL;
    return n;
}

/* Says what is wrong where; -1. */
static int
refuse(const char *path, unsigned lineno, const char *text, const char *why)
{
    fprintf(stderr, "%s line %u: %s%s%s\n", path, lineno, why,
            text[0] != '\0' ? ": " : "", text);
    return -1;
}

int
conffile_read(const char *path, char *prog,
              int (*parse)(int argc, char **argv))
{
    char buf[4096], text[4096], *words[CONF_ARGS_MAX + 1];
    unsigned lineno = 0;
    int rc = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        fprintf(stderr, "cannot read the options file %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    while (rc == 0 && fgets(buf, sizeof(buf), f) != NULL) {
        char *line;
        int n;

        lineno++;
        if (strchr(buf, '\n') == NULL && !feof(f)) {
            rc = refuse(path, lineno, "", "line too long");
            break;
        }
        line = strip(buf);
        if (line[0] == '\0' || skipped(line)) {
            continue;
        }
        snprintf(text, sizeof(text), "%s", line);
        if (line[0] != '-') {
            rc = refuse(path, lineno, text, "not an option");
        } else if ((n = split(line, prog, words)) < 0) {
            rc = refuse(path, lineno, text, "too many words");
        } else if ((rc = parse(n, words)) < 0) {
            refuse(path, lineno, text, "refused");
        }
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "cannot read the options file %s\n", path);
        rc = -1;
    }
    fclose(f);
    return rc;
}
