/*
 * usage.h: the lines -h prints, an option and its help, the help wrapped
 * at 79 columns under its own column.
 */
#ifndef MCPM_BASE_USAGE_H
#define MCPM_BASE_USAGE_H

/* "left help": help starts at column col (on a line of its own when left
 * is wider than that) and goes on under it; left alone when help is
 * NULL. */
void usage_line(const char *left, int col, const char *help);

#endif
