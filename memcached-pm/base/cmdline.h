/*
 * cmdline.h: the command line, as memcached 1.6 takes it.  Main thread,
 * before any other starts.
 */
#ifndef MCPM_CMDLINE_H
#define MCPM_CMDLINE_H

/*
 * Fill `settings` (settings.h) from the command line: the defaults, every
 * option given, then the rules between options.  Returns 0 to run, 1 when
 * an option asked for output and a clean exit (-h, -V, -i), and -1 after
 * printing a message on stderr for an unknown option or a bad value: the
 * caller exits with status 1 then, never falling back to a default; or
 * -EX_USAGE where memcached exits 64 (options that exclude each other).
 */
int cmdline_parse(int argc, char **argv);

#endif
