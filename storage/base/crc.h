/*
 * crc.h: CRC-32C (Castagnoli), the checksum of the PMEM file.
 *
 * The superblock and every persisted item carry one, so a torn or partly
 * flushed write is recognised at recovery.  SSE 4.2's crc32 instruction
 * where the CPU has it, else tables (slice-by-8): the same CRC either way,
 * so a file reads the same on any machine.
 */
#ifndef MCPM_STORAGE_CRC_H
#define MCPM_STORAGE_CRC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Extend `crc` (0 to start) over n bytes at p and return the new value; the
 * result of one call can be fed to the next to checksum pieces.  Pure: no
 * locking needed (the tables are built once, thread-safely, on first use),
 * cannot fail.  crc_32c(0, "123456789", 9) == 0xE3069283.
 */
uint32_t crc_32c(uint32_t crc, const void *p, size_t n);

/* The same with the tables only, whatever the CPU (for tests). */
uint32_t crc_32c_portable(uint32_t crc, const void *p, size_t n);

#endif
