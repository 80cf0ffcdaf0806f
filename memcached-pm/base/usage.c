/*
 * usage.c: -h's lines (usage.h).
 */
#include "memcached-pm/base/usage.h"

#include <stdio.h>
#include <string.h>

#define USAGE_WIDTH 79

/* "left help", the help wrapped at USAGE_WIDTH under its first column
 * (col), on a line of its own when left is wider than that. */
void
usage_line(const char *left, int col, const char *help)
{
    int at;

    if (help == NULL) {
        printf("%s\n", left);
        return;
    }
    at = printf("%-*s", col - 1, left);
    while (*help != '\0') {
        int room = USAGE_WIDTH - col, n = (int)strlen(help);

        if (at >= col) {
            printf("\n%*s", col - 1, "");
        }
        if (n > room) {
            n = room;
            while (n > 0 && help[n] != ' ') {
                n--;
            }
            n = n > 0 ? n : room;
        }
        printf(" %.*s", n, help);
        help += n;
        while (*help == ' ') {
            help++;
        }
        at = col;
    }
    putchar('\n');
}
