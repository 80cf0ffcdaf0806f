/*
 * conffile.h: options from a file, for a service (--config-file).
 *
 * The file is laid out as Debian's /etc/memcached.conf, so that an
 * operator can start from their memcached's: options as on the command
 * line, any number to a line, each complete on its line (an option's
 * value on the next line is an error, not a value), words split at
 * blanks (no quoting), '#' to the end of the line a comment ("\#" for a
 * '#' of a value).  Read as Debian's start script reads it, lines of
 * -d and -h, and `logfile` lines, are passed over: under a service
 * manager the server stays in the foreground and its log goes to the
 * journal.  Any other line that is not an option is refused.
 *
 * The file's options come first; those of the command line are applied
 * after them, so a unit's own flags (the memory file, the takeover
 * socket) win.
 */
#ifndef MCPM_BASE_CONFFILE_H
#define MCPM_BASE_CONFFILE_H

#include <stdbool.h>

/* The file named by --config-file=PATH (or --config-file PATH) in argv;
 * NULL if none is. */
const char *conffile_path(int argc, char **argv);

/*
 * Each line's words go to parse(argc, argv), argv[0] being prog, as a
 * command line would.  0; or at the first line parse() does not return
 * 0 for, what it returned, after a message naming the file and the line
 * when that is a refusal (below 0); -1 for a file or a line that cannot
 * be read, or a line that is not an option.
 */
int conffile_read(const char *path, char *prog,
                  int (*parse)(int argc, char **argv));

#endif
